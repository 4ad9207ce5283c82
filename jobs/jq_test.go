package jobs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/transform"
)

// A job keeps its jq program and delivers every record through it; the
// records it fails on are quarantined; Create refuses a program that does
// not compile, naming the column.
func TestJobJQ(t *testing.T) {
	st := memsink.New()
	dump(t, st, 200, 50)
	d := &dest{}
	js, rn := newRunner(t, st, d, 1)
	const prog = `if .payload | endswith("7") then error("ends in 7") else .payload |= . + "-fixed" end`
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "fix", JQ: prog}); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, js, "fix")
	if j.State != jobs.Completed || j.Delivered != 180 || j.Quarantined != 20 || j.Spec.JQ != prog {
		t.Fatalf("job %+v", j)
	}
	for it := range d.got {
		if !strings.HasSuffix(it, "-fixed") {
			t.Fatalf("delivered %s", it)
		}
	}
	_, err := js.Create(t.Context(), jobs.Spec{JQ: ".payload |= ascii_downcas"})
	var je *transform.Error
	if !errors.Is(err, dlqdump.ErrConfig) || !errors.As(err, &je) || je.Column() != 13 || !strings.Contains(err.Error(), "job JQ") {
		t.Fatalf("a bad JQ: %v", err)
	}
}
