package jobs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/selection"
)

// A job with a Select delivers what it selects (here by payload text,
// which Where cannot say), and only that; Create keeps the expression with
// its relative times made absolute, and refuses one that does not parse,
// naming the column.
func TestJobSelect(t *testing.T) {
	st := memsink.New()
	dump(t, st, 400, 100)
	d := &dest{}
	js, rn := newRunner(t, st, d, 1)
	j, err := js.Create(t.Context(), jobs.Spec{ID: "sel", Select: `payload ~ "item-001" and reason = failed and time >= now-1h`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(j.Spec.Select, `payload ~ item-001 and reason = failed and time >= 20`) || strings.Contains(j.Spec.Select, "now") {
		t.Fatalf("the job keeps Select %q", j.Spec.Select)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, js, "sel")
	// item-00100 to item-00199, the even ones: 50.
	if j.State != jobs.Completed || j.Delivered != 50 || d.count() != 50 {
		t.Fatalf("job %+v, %d delivered", j, d.count())
	}
	for it := range d.got {
		if !strings.HasPrefix(it, "item-001") {
			t.Fatalf("delivered %s", it)
		}
	}
	_, err = js.Create(t.Context(), jobs.Spec{Select: "reason = failed and tme >= 2026-01-01"})
	var se *selection.Error
	if !errors.Is(err, dlqdump.ErrConfig) || !errors.As(err, &se) || se.Column() != 25 || !strings.Contains(err.Error(), "Select") {
		t.Fatalf("a bad Select: %v", err)
	}
}
