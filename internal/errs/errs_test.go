package errs_test

import (
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump/internal/errs"
)

func TestChain(t *testing.T) {
	a, b := errors.New("dlqdump: closed"), errors.New("dlqdump: record not written")
	err := errs.Chain(a, b, errors.New("the queue was shut down"))
	if got, want := err.Error(), "dlqdump: closed: record not written: the queue was shut down"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatal("errors.Is does not find both sentinels")
	}
}
