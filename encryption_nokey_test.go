package dlqdump_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// noKeySignal is a MetricsWriter that signals every Fail("no_key").
type noKeySignal struct {
	dlqdump.NopMetrics
	c chan struct{}
}

func (m *noKeySignal) Fail(reason string) {
	if reason == "no_key" {
		select {
		case m.c <- struct{}{}:
		default:
		}
	}
}

// TestRunNoKey restores encrypted segments with a wrong identity, without
// Encryption and without identities: a one-shot Run (and its dry run, and
// the next Run of the same Restorer) returns an error wrapping ErrNoKey
// naming every segment left, counts them in the Report and keeps the error
// as Stats().LastError; a background pass leaves them in place and says it
// in Stats().LastError too. Run used to return nil and a zero Report.
func TestRunNoKey(t *testing.T) {
	dir := t.TempDir()
	st := encStore{name: "fs", writer: func() dlqdump.Writer { return &fs.Writer{Directory: dir} }, reader: &fs.Reader{Directory: dir}}
	a, other := newIdentity(t), newIdentity(t)
	items, _ := encItems("nokey", 1500)
	dumpEncrypted(t, st, items, a.Recipient())
	ready := areaNames(t, st.reader, sink.AreaReady)
	if len(ready) < 2 || len(ready) > 10 {
		t.Fatalf("%d segments, want 2 to 10", len(ready))
	}
	check := func(t *testing.T, what string, rep dlqdump.Report, err error) {
		t.Helper()
		if !errors.Is(err, dlqdump.ErrNoKey) {
			t.Fatalf("%s: error %v, want one wrapping ErrNoKey", what, err)
		}
		for _, n := range ready {
			if !strings.Contains(err.Error(), n) {
				t.Fatalf("%s: error %q does not name segment %s", what, err, n)
			}
		}
		if rep.NoKeySegments != len(ready) || rep.Delivered != 0 || rep.Segments != 0 {
			t.Fatalf("%s: report %+v, want NoKeySegments %d and nothing delivered", what, rep, len(ready))
		}
		if got := areaNames(t, st.reader, sink.AreaReady); len(got) != len(ready) {
			t.Fatalf("%s: %d segments ready, want %d", what, len(got), len(ready))
		}
	}
	for _, c := range []struct {
		name string
		enc  *dlqdump.Encryption
	}{
		{"wrong identity", &dlqdump.Encryption{Identities: []envelope.Identity{other}}},
		{"no Encryption", nil},
		{"no identities", &dlqdump.Encryption{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := &collector{}
			r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st.reader, Decoder: poisonDecoder{}, Queue: col, Encryption: c.enc})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			rep, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true})
			check(t, "dry run", rep, err)
			if r.Stats().LastError != nil {
				t.Fatalf("a dry run set LastError: %v", r.Stats().LastError)
			}
			rep, err = r.Run(context.Background(), dlqdump.RunOptions{})
			check(t, "run", rep, err)
			if !errors.Is(r.Stats().LastError, dlqdump.ErrNoKey) {
				t.Fatalf("LastError %v after the run", r.Stats().LastError)
			}
			// The same Restorer does not open them again, and says so
			// again.
			rep, err = r.Run(context.Background(), dlqdump.RunOptions{})
			check(t, "second run", rep, err)
			if len(col.delivered()) != 0 {
				t.Fatalf("delivered %d", len(col.delivered()))
			}
		})
	}
	t.Run("background", func(t *testing.T) {
		sig := &noKeySignal{c: make(chan struct{}, 1)}
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st.reader, Decoder: poisonDecoder{}, Queue: &collector{},
			Encryption: &dlqdump.Encryption{Identities: []envelope.Identity{other}}, MetricsWriter: sig})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		<-sig.c
		// A dry run waits for the background pass to end.
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true})
		check(t, "dry run after a background pass", rep, err)
		if !errors.Is(r.Stats().LastError, dlqdump.ErrNoKey) {
			t.Fatalf("LastError %v after a background pass", r.Stats().LastError)
		}
	})
}
