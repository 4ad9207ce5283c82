package faults

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// killed is what the test's Kill panics with instead of ending the process.
type killed struct{ p Point }

func catchKill(t *testing.T, f func()) (p *Point) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			k, ok := r.(killed)
			if !ok {
				panic(r)
			}
			p = &k.p
		}
	}()
	f()
	return nil
}

func TestInjectorModes(t *testing.T) {
	for _, tc := range []struct {
		mode      Mode
		made      bool // fn ran
		discarded bool // Lost handed the result to discard
		killed    bool
	}{
		{Fail, false, false, false},
		{Lost, true, true, false},
		{Crash, false, false, true},
		{CrashAfter, true, false, true},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			in := New(Point{Op: "op", K: 2, Mode: tc.mode})
			in.Kill = func(p Point) { panic(killed{p}) }
			var fired []Point
			in.OnFire = func(p Point) { fired = append(fired, p) }
			var events []Event
			in.Observe = func(e Event) { events = append(events, e) }
			made, discarded := 0, 0
			call := func() (int, error) {
				return Call(context.Background(), in, "op", func() (int, error) { made++; return 42, nil }, func(int) { discarded++ })
			}
			if v, err := call(); v != 42 || err != nil {
				t.Fatalf("call 1 = %d, %v; want 42, nil", v, err)
			}
			var v int
			var err error
			kp := catchKill(t, func() { v, err = call() })
			if (kp != nil) != tc.killed {
				t.Fatalf("killed = %v, want %v", kp != nil, tc.killed)
			}
			if got := made == 2; got != tc.made {
				t.Fatalf("call made = %v, want %v", got, tc.made)
			}
			if got := discarded == 1; got != tc.discarded {
				t.Fatalf("result discarded = %v, want %v", got, tc.discarded)
			}
			if len(fired) != 1 || fired[0].K != 2 {
				t.Fatalf("OnFire saw %v", fired)
			}
			if !tc.killed {
				var fe *Error
				if v != 0 || !errors.As(err, &fe) || !errors.Is(err, ErrInjected) || fe.Point.Mode != tc.mode {
					t.Fatalf("call 2 = %d, %v; want 0 and an injected %s failure", v, err, tc.mode)
				}
				if len(events) != 2 || events[1].Fault == nil || events[0].Fault != nil {
					t.Fatalf("events %+v", events)
				}
			}
			if _, err := call(); err != nil {
				t.Fatalf("call 3: %v", err)
			}
			if c := in.Counts(); c["op"] != 3 {
				t.Fatalf("counted %v", c)
			}
		})
	}
}

func TestInjectorLostKeepsGenuineFailure(t *testing.T) {
	in := New(Point{Op: "op", K: 1, Mode: Lost})
	genuine := errors.New("disk on fire")
	if err := in.Do(nil, "op", func() error { return genuine }); err != genuine {
		t.Fatalf("got %v, want the call's own error", err)
	}
}

func TestInjectorStall(t *testing.T) {
	in := New(Point{Op: "op", K: 1, Mode: Stall}, Point{Op: "op", K: 2, Mode: Stall})
	fired := make(chan Point, 2)
	in.OnFire = func(p Point) { fired <- p }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- in.Do(ctx, "op", func() error { t.Error("a stalled call was made"); return nil }) }()
	<-fired
	select {
	case err := <-done:
		t.Fatalf("a stalled call returned by itself: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInjected) {
		t.Fatalf("stall ended by its context: %v", err)
	}
	go func() { done <- in.Do(nil, "op", func() error { return nil }) }()
	<-fired
	in.Release()
	in.Release()
	if err := <-done; !errors.Is(err, ErrInjected) {
		t.Fatalf("stall ended by Release: %v", err)
	}
}

func TestNilInjectorPassesThrough(t *testing.T) {
	var in *Injector
	if err := in.Do(nil, "op", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(in.Counts()) != 0 || in.Fired() != nil {
		t.Fatal("a nil Injector counted")
	}
	in.Release()
}

func TestInjectorConcurrent(t *testing.T) {
	in := New(Point{Op: "op", K: 500, Mode: Fail})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range 8 {
		wg.Go(func() {
			for range 125 {
				if err := in.Do(nil, "op", func() error { return nil }); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if in.Counts()["op"] != 1000 || failed != 1 {
		t.Fatalf("%d calls, %d failed; want 1000 and 1", in.Counts()["op"], failed)
	}
}
