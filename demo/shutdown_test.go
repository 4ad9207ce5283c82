package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	dsink "github.com/dlqdump/dlqdump/sink"
)

// dumpedIDs reads every record in the sink's ready and quarantine areas and
// returns how many times each task id is there, and each record's reason.
func dumpedIDs(t *testing.T, app *App) (count map[string]int, reason map[string]string) {
	t.Helper()
	ctx := context.Background()
	count, reason = map[string]int{}, map[string]string{}
	for _, area := range []dsink.Area{dsink.AreaReady, dsink.AreaQuarantine} {
		for si, err := range app.sink.reader.List(ctx, area) {
			if err != nil {
				t.Fatalf("list %s: %v", area, err)
			}
			f, err := app.sink.reader.Open(ctx, area, si.Name)
			if err != nil {
				t.Fatalf("open %s/%s: %v", area, si.Name, err)
			}
			sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
			if err != nil {
				f.Close()
				t.Fatalf("segment %s: %v", si.Name, err)
			}
			for {
				rec, err := sr.Next()
				if err != nil {
					break
				}
				var r record
				if err := json.Unmarshal(rec.Payload, &r); err != nil {
					t.Fatalf("segment %s: record %q: %v", si.Name, rec.Payload, err)
				}
				count[r.ID]++
				reason[r.ID], _ = rec.Headers.Get(dlqdump.HeaderReason)
			}
			f.Close()
		}
	}
	return count, reason
}

// Issue 11, defect 10: a graceful stop of a scene whose queue is full and
// whose workers cannot finish in time, while clients keep posting. Every
// task answered 202 must end processed or in the dump (exactly one of the
// two), every task answered 503 in neither, and the App's ledger must add
// up. Before the fix the tasks still in the koykov queue when the graceful
// budget ended were left there: neither done nor dumped, and not counted.
func TestGracefulStopKeepsEveryAcceptedTask(t *testing.T) {
	stopRace(t, false, func(n int) string {
		// Every tenth task keeps a worker busy for a minute (the graceful
		// budget ends long before); the rest are quick.
		if n%10 == 9 {
			return "!sleep=1m"
		}
		return "!ok"
	})
}

// The same with a force stop, tasks that fail and wait for their retry,
// and slow ones: retries waiting and attempts in progress end in the dump.
func TestForceStopKeepsEveryAcceptedTask(t *testing.T) {
	stopRace(t, true, func(n int) string {
		switch n % 4 {
		case 0:
			return "!fail"
		case 1:
			return "!sleep=20ms"
		}
		return "!ok"
	})
}

// stopRace posts tasks with payload(n) from several clients, stops the
// scene (force, or graceful with its budget ending as soon as the intake
// is closed) while they post, and checks where every task ended.
func stopRace(t *testing.T, force bool, payload func(n int) string) {
	cfg := testConfig()
	cfg.Capacity = 20
	cfg.Workers = 2
	cfg.MaxRetries = 2
	cfg.BackoffBase = duration(50 * time.Millisecond) // retries wait in the scheduler
	cfg.BackoffMax = duration(time.Second)
	cfg.AutoRestore = false // what is dumped stays in the dump, to be read back
	app, _ := newTestApp(t, &cfg)
	srv := serve(t, app)

	const clients = 6
	const before = 200 // tasks accepted before the stop begins
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		refused  = map[string]bool{}
		enough   = make(chan struct{})
		closing  = make(chan struct{}) // the first 503: the stop closed the intake
		once1    sync.Once
		once2    sync.Once
		wg       sync.WaitGroup
		failures = make(chan string, clients)
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				id := fmt.Sprintf("c%d-%d", c, n)
				resp, err := http.Post(srv.URL+"/enqueue", "application/json",
					strings.NewReader(fmt.Sprintf(`{"id":%q,"payload":%q}`, id, payload(n))))
				if err != nil {
					failures <- fmt.Sprintf("POST %s: %v", id, err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusAccepted:
					accepted[id] = true
					if len(accepted) == before {
						once1.Do(func() { close(enough) })
					}
				case http.StatusServiceUnavailable:
					refused[id] = true
				default:
					mu.Unlock()
					failures <- fmt.Sprintf("POST %s: status %d", id, resp.StatusCode)
					return
				}
				mu.Unlock()
				if resp.StatusCode == http.StatusServiceUnavailable {
					once2.Do(func() { close(closing) })
					return
				}
			}
		}()
	}
	select {
	case <-enough:
	case f := <-failures:
		t.Fatal(f)
	}

	// The graceful budget ends as soon as the intake is closed (or, as a
	// backstop for a stop that never closes it, after a few seconds): the
	// workers cannot finish what is queued, which is the case under test.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() {
		select {
		case <-closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	stopErr := app.StopScene(ctx, force)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	if stopErr != nil {
		t.Errorf("StopScene: %v", stopErr)
	}

	inDump, why := dumpedIDs(t, app)
	var done, dumped, shutdown int
	var lost []string
	for id := range accepted {
		tk := app.store.get(id)
		if tk == nil {
			lost = append(lost, id+" (forgotten)")
			continue
		}
		switch st := tk.status(); {
		case st == stDone && inDump[id] == 0:
			done++
		case st == stDumped && inDump[id] == 1:
			dumped++
			if why[id] == reasonShutdown {
				shutdown++
			}
		default:
			lost = append(lost, fmt.Sprintf("%s (state %s, %d times in the dump)", id, st, inDump[id]))
		}
	}
	for id := range refused {
		if app.store.get(id) != nil || inDump[id] != 0 {
			t.Errorf("task %s was answered 503 but is in the store or the dump (%d times)", id, inDump[id])
		}
	}
	t.Logf("accepted %d: done %d, in the dump %d (%d of them at shutdown); refused %d", len(accepted), done, dumped, shutdown, len(refused))
	if len(lost) > 0 {
		if len(lost) > 10 {
			lost = append(lost[:10], "...")
		}
		t.Errorf("%d of %d accepted tasks are neither processed nor in the dump exactly once: %s",
			len(accepted)-done-dumped, len(accepted), strings.Join(lost, ", "))
	}
	if shutdown == 0 {
		t.Errorf("no task was dumped with reason %s: the stop found nothing queued or running", reasonShutdown)
	}
	if l := app.ledger(); !l.OK() || l.Accepted != uint64(len(accepted)) || l.Done != int64(done) || l.InDump != int64(dumped) {
		t.Errorf("ledger %+v, want accepted %d = done %d + in the dump %d, OK", l, len(accepted), done, dumped)
	}
}

// watchWriter is a syncBuffer that closes found when the output first
// contains want.
type watchWriter struct {
	syncBuffer
	want  string
	found chan struct{}
	once  sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.found) })
	}
	return n, err
}

// The command in its interactive form: tasks accepted over HTTP, a signal
// (ctx), a second one (hurry) while the workers are busy; the exit message
// places every accepted task and the exit status is 0.
func TestShutdownSummary(t *testing.T) {
	dir := t.TempDir()
	stdout := &watchWriter{want: "dashboard: http://", found: make(chan struct{})}
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry := make(chan struct{})
	status := make(chan int, 1)
	go func() {
		status <- runCtx(ctx, hurry, []string{"-addr", "127.0.0.1:0", "-dir", dir, "-log-every", "0",
			"-capacity", "5", "-workers", "1", "-producers", "0", "-deadline", "0", "-fail-rate", "0",
			"-auto-restore=false", "-shutdown-timeout", "1m"}, stdout, &stderr)
	}()
	select {
	case <-stdout.found:
	case code := <-status:
		t.Fatalf("exit %d before serving\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	i := strings.Index(out, "dashboard: ")
	base := strings.TrimSuffix(strings.Fields(out[i+len("dashboard: "):])[0], "/")

	// The first task occupies the only worker for a minute (it is the
	// first the worker takes), so none is processed: the queue fills and
	// the rest leak into the dump, whatever the timing.
	for n := range 10 {
		payload := "!ok"
		if n == 0 {
			payload = "!sleep=1m"
		}
		if code, b := do(t, "POST", base+"/enqueue", fmt.Sprintf(`{"id":"s%d","payload":%q}`, n, payload)); code != http.StatusAccepted {
			t.Fatalf("POST s%d: %d %s", n, code, b)
		}
	}
	cancel()     // the first signal: the worker would need a minute
	close(hurry) // the second: do not wait for it
	var code int
	select {
	case code = <-status:
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after the second signal\nstdout:\n%s", stdout.String())
	}
	out = stdout.String()
	if code != 0 {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	want := "tasks: 10 accepted + 0 found in the dump = 0 processed + 10 in the dump + 0 quarantined + 0 lost + 0 still in the queue"
	if !strings.Contains(out, want) || !strings.Contains(out, "OK: every accepted task was processed or is in the dump") {
		t.Errorf("the exit message lacks %q and the OK line:\n%s", want, out)
	}
}

// The ledger's verdict: counts that do not add up, a lost task or a task
// left in the queue after the stop are failures, and say so.
func TestLedgerCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		l    ledger
		want string // "" for OK
	}{
		{"ok", ledger{Accepted: 10, Adopted: 2, Done: 5, InDump: 6, Quarantined: 1, Stopped: true}, ""},
		{"running scene in flight", ledger{Accepted: 10, Done: 5, InFlight: 5}, ""},
		{"left in the queue", ledger{Accepted: 1500, Done: 128, InDump: 1298, InFlight: 74, Stopped: true}, "74 neither processed nor in the dump"},
		{"lost", ledger{Accepted: 3, Done: 2, Lost: 1, Stopped: true}, "1 lost"},
		{"unaccounted", ledger{Accepted: 3, Done: 3, Unaccounted: 2, Stopped: true}, "2 not placed"},
		{"do not add up", ledger{Accepted: 1500, Done: 128, InDump: 1298, Stopped: true}, "= 1500, but 1426 are placed"},
	} {
		err := c.l.check()
		var b strings.Builder
		c.l.Print(&b)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		case c.want != "" && !strings.Contains(b.String(), "FAILED: "):
			t.Errorf("%s: printed %q, want a FAILED line", c.name, b.String())
		}
	}
}
