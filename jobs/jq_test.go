package jobs_test

import (
	"errors"
	"fmt"
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

// A job keeps JQKeepLayout and runs its program with it: the payloads it
// changes keep their stored layout but for the field; Create refuses it
// without a program.
func TestJobJQKeepLayout(t *testing.T) {
	st := memsink.New()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.Writer(), Capacity: 64 * dlqdump.Kilobyte})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := q.Enqueue(fmt.Sprintf(`{"z": %d, "email":"User%d@EXAMPLE.com","a":true}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	d := &dest{}
	js, rn := newRunner(t, st, d, 1)
	spec := jobs.Spec{ID: "keep", JQ: `.payload.email |= ascii_downcase`, JQKeepLayout: true}
	if _, err := js.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, js, "keep")
	if j.State != jobs.Completed || j.Delivered != 20 || !j.Spec.JQKeepLayout || !strings.Contains(j.Spec.Describe(), "(layout kept)") {
		t.Fatalf("job %+v", j)
	}
	for i := range 20 {
		if want := fmt.Sprintf(`{"z": %d, "email":"user%d@example.com","a":true}`, i, i); d.got[want] != 1 {
			t.Fatalf("%s not delivered: %v", want, d.got)
		}
	}
	_, err = js.Create(t.Context(), jobs.Spec{JQKeepLayout: true})
	if !errors.Is(err, dlqdump.ErrConfig) || !strings.Contains(err.Error(), "JQKeepLayout") {
		t.Fatalf("JQKeepLayout without JQ: %v", err)
	}
}
