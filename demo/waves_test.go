package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 20: the demo's default scene never overflowed its queue (queue
// 0/500, every dead letter "failed") although the README said it did. The
// default scene now comes in waves: a burst of four times the producers
// overflows the default queue into the dump ("leak"), then the calm comes
// back; producers set by hand end the waves.
func TestWavesOverflowTheDefaultScene(t *testing.T) {
	cfg := defaultSceneConfig()
	app, out := newTestApp(t, &cfg)
	s := app.current()
	changes := make(chan int, 16)
	app.startWaves(s, waveOptions{Calm: cfg.Producers, Burst: 4 * cfg.Producers, CalmFor: 10 * time.Millisecond, BurstFor: 3 * time.Second,
		changed: func(n int) { changes <- n }})
	if n := <-changes; n != 4*cfg.Producers {
		t.Fatalf("first change: %d producers, want a burst of %d", n, 4*cfg.Producers)
	}
	if n := <-changes; n != cfg.Producers {
		t.Fatalf("second change: %d producers, want the calm's %d", n, cfg.Producers)
	}
	if n := app.c.leaked[reasonIndex(reasonLeak)].Load(); n == 0 {
		t.Errorf("a burst of the default scene did not overflow the queue; output:\n%s", out.String())
	}

	// The dashboard's producer buttons end the waves.
	srv := httptest.NewServer(app.Handler())
	defer srv.Close()
	if code, body := do(t, "POST", srv.URL+"/api/v1/producer-up", ""); code != 200 {
		t.Fatalf("producer-up: %d %s", code, body)
	}
	app.mu.Lock()
	w := app.waves
	app.mu.Unlock()
	if w != nil {
		t.Fatal("the waves go on after the producers were set by hand")
	}
	// The waves stop before the hand's change applies: one more than the
	// calm's or, when the next burst came before the click (its calm is
	// 10ms here), than the burst's.
	if got := int(s.prodUp.Load()); got != cfg.Producers+1 && got != 4*cfg.Producers+1 {
		t.Errorf("%d producers after producer-up, want %d or %d", got, cfg.Producers+1, 4*cfg.Producers+1)
	}
}

// signalWriter is a syncBuffer that closes seen once its text matches want.
type signalWriter struct {
	syncBuffer
	want *regexp.Regexp
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if w.want.MatchString(w.String()) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// Issue 20: each run left its directory in the system's temporary
// directory without a word. The first line says the directory is
// temporary; at exit one that holds segments is kept and the demo says so,
// with how to restore or remove it.
func TestTemporaryDirectoryKeptAndSaid(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Stopped (Ctrl-C) once the status line shows a segment in the dump.
	out := &signalWriter{want: regexp.MustCompile(`segments ready [1-9]`), seen: make(chan struct{})}
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runCtx(ctx, make(chan struct{}), []string{"-addr", "127.0.0.1:0", "-log-every", "100ms",
			"-wave-calm", "10ms", "-wave-burst", "1m", "-shutdown-timeout", "10ms"}, out, &stderr)
	}()
	<-out.seen
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), stderr.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "dlqdump-demo-*"))
	if len(dirs) != 1 {
		t.Fatalf("temporary directories: %v", dirs)
	}
	text := out.String()
	for _, want := range []string{
		"segments go to " + dirs[0] + ", a new temporary directory",
		dirs[0] + " is kept, with its segments; to restore them (and dump nothing new): go run ./demo -dir " + dirs[0] + " -scenario restore; to drop them: rm -r " + dirs[0],
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q:\n%s", want, text)
		}
	}
	followRestoreHint(t, text, dirs[0])
}

// Issue 30: the hint the demo printed at exit, go run ./demo -dir DIR,
// started a new scene whose waves dumped more. Followed as printed, the
// hint now restores the records the run left, every one of them, and
// produces nothing: the summary finds as many records as the dump held,
// produces none, restores (or quarantines) each, and leaves no record
// ready.
func followRestoreHint(t *testing.T, text, dir string) {
	t.Helper()
	m := regexp.MustCompile(`to restore them \(and dump nothing new\): go run \./demo ([^;\n]+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no hint to restore:\n%s", text)
	}
	left := readyIn(t, dir)
	if left == 0 {
		t.Fatalf("the run left no record in %s:\n%s", dir, text)
	}
	var stdout, stderr syncBuffer
	if code := runCtx(context.Background(), make(chan struct{}), strings.Fields(m[1]), &stdout, &stderr); code != 0 {
		t.Fatalf("go run ./demo %s: exit %d\n%s\n%s", m[1], code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		fmt.Sprintf("restoring the %d records the dump holds; no producers", left),
		fmt.Sprintf("found %d ", left),
		"produced 0 ",
		fmt.Sprintf("tasks: 0 accepted + %d found in the dump = ", left),
		"OK: lost = 0; restored + quarantined = dumped + found",
		"segments are in " + dir + ": 0 ready to restore",
	} {
		if !strings.Contains(demoSpace.ReplaceAllString(out, " "), want) {
			t.Errorf("following the hint printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "to restore them") {
		t.Errorf("following the hint left records to restore:\n%s", out)
	}
	if n := readyIn(t, dir); n != 0 {
		t.Errorf("after following the hint, %d records are ready in %s, want 0", n, dir)
	}
}

// readyIn counts the records ready to restore in dir.
func readyIn(t *testing.T, dir string) uint64 {
	t.Helper()
	sk, err := newFSSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := sk.readyRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The restore scenario after a crash: a run killed before its dump closed
// leaves its open segment unpublished, which the scene's Queue publishes
// when it starts. The scenario counted the records ready before that, so
// it restored more than it found and failed: "FAILED: lost = -1170;
// restored + quarantined = 3741, dumped + found = 2571", after waiting for
// its drain timeout. It now publishes them first and counts them.
func TestRestoreScenarioAfterACrash(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr syncBuffer
	args := []string{"-dir", dir, "-scenario", "burst", "-duration", "2s", "-drain-timeout", "1ms", "-log-every", "0",
		"-flush", "200ms", "-auto-restore=false", "-fail-rate", "0.5", "-max-retries", "0"}
	_ = runCtx(context.Background(), make(chan struct{}), args, &stdout, &stderr) // not drained: exit 1
	names, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	if len(names) < 2 {
		t.Fatalf("the run left %d segments, want 2 or more:\n%s\n%s", len(names), stdout.String(), stderr.String())
	}
	before := readyIn(t, dir)
	// A crash: the last segment is left as its writer had it, open.
	last := names[len(names)-1]
	if err := os.Rename(last, filepath.Join(dir, "."+filepath.Base(last)+".open")); err != nil {
		t.Fatal(err)
	}
	stdout, stderr = syncBuffer{}, syncBuffer{}
	if code := runCtx(context.Background(), make(chan struct{}), []string{"-dir", dir, "-scenario", "restore", "-log-every", "0", "-drain-timeout", "2m"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	out := demoSpace.ReplaceAllString(stdout.String(), " ")
	for _, want := range []string{fmt.Sprintf("found %d ", before), "OK: lost = 0; restored + quarantined = dumped + found"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, stdout.String())
		}
	}
	if n := readyIn(t, dir); n != 0 {
		t.Errorf("%d records left ready, want 0", n)
	}
}
