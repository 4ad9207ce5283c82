package destination_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/destination"
)

type nopDest struct{ url string }

func (nopDest) Enqueue(any) error { return nil }
func (nopDest) Close() error      { return nil }

func TestRegistry(t *testing.T) {
	if _, err := destination.Open(context.Background(), "zz://h/x", nil); !errors.Is(err, destination.ErrUnknownScheme) || !strings.Contains(err.Error(), "none is registered") {
		t.Fatalf("Open before any Register: %v", err)
	}
	var gotTimeout string
	destination.Register(destination.Scheme{Name: "test", Form: "test://HOST/NAME", Open: func(_ context.Context, u *url.URL, o *destination.Options) (destination.Destination, error) {
		gotTimeout = o.TimeoutOrDefault().String()
		return nopDest{u.String()}, nil
	}})
	d, err := destination.Open(context.Background(), "test://h/x", nil)
	if err != nil || d.(nopDest).url != "test://h/x" || gotTimeout != "30s" {
		t.Fatalf("Open: %v %v, timeout %s", d, err, gotTimeout)
	}
	_, err = destination.Open(context.Background(), "zz://h/x", nil)
	if !errors.Is(err, destination.ErrUnknownScheme) || !strings.Contains(err.Error(), "test://HOST/NAME") {
		t.Fatalf("Open of an unknown scheme: %v; want ErrUnknownScheme naming the forms registered", err)
	}
	if s := destination.Schemes(); len(s) != 1 || s[0].Name != "test" {
		t.Fatalf("Schemes: %v", s)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Register of a scheme did not panic")
		}
	}()
	destination.Register(destination.Scheme{Name: "test", Open: func(context.Context, *url.URL, *destination.Options) (destination.Destination, error) {
		return nil, nil
	}})
}
