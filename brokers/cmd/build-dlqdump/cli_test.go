package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/brokers/internal/clibuild"
	"github.com/dlqdump/dlqdump/internal/childproc"
)

// binary is the dlqdump command built with the brokers' schemes.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlqdump-brokers")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "dlqdump")
	if err := clibuild.Build(context.Background(), "", binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs the command and checks its exit status.
func run(t *testing.T, want int, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	childproc.DieWithParent(cmd)
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if r.code != want {
		t.Fatalf("dlqdump %s: %s\nwant exit %d", strings.Join(args, " "), r, want)
	}
	return r
}

const n = 500

func dump(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := brokertest.Dump(dir, n, 4*dlqdump.Kilobyte, dlqdump.Headers{dlqdump.HeaderSource: "orders"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startNATS(t *testing.T) *brokertest.NATS {
	t.Helper()
	srv, err := brokertest.StartNATS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.Stream(&nats.StreamConfig{Name: "REDRIVE", Subjects: []string{"orders.redrive"}}); err != nil {
		t.Fatal(err)
	}
	return srv
}

func startKafka(t *testing.T) *brokertest.Kafka {
	t.Helper()
	k, err := brokertest.StartKafka(t.TempDir(), "redrive")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// checkMsgs checks that msgs are the n records, once each, with headers.
func checkMsgs(t *testing.T, msgs []brokertest.Msg) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Data)] = true
		if m.Headers[dlqdump.HeaderSource] != "orders" || m.Headers[dlqdump.HeaderReplays] != "1" || m.Headers["_watermill_message_uuid"] == "" {
			t.Fatalf("headers %v", m.Headers)
		}
	}
	if len(msgs) != n || len(seen) != n {
		t.Fatalf("%d messages, %d distinct; want %d", len(msgs), len(seen), n)
	}
}

func TestRestoreToNATS(t *testing.T) {
	srv := startNATS(t)
	dir := dump(t)
	r := run(t, 0, "restore", dir, "--to", srv.URL()+"/orders.redrive", "--concurrency", "8")
	if !strings.Contains(r.stderr, fmt.Sprintf("restored %d records", n)) {
		t.Fatalf("no report: %s", r)
	}
	msgs, err := srv.ReadStream("REDRIVE")
	if err != nil {
		t.Fatal(err)
	}
	checkMsgs(t, msgs)
}

func TestRestoreToKafka(t *testing.T) {
	k := startKafka(t)
	dir := dump(t)
	run(t, 0, "restore", dir, "--to", "kafka://"+k.Addr()+"/redrive", "--concurrency", "8")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	msgs, err := k.ReadTopic(ctx, "redrive", n)
	if err != nil {
		t.Fatal(err)
	}
	checkMsgs(t, msgs)
}

// A broker that is down stops the restore with exit status 5 and nothing
// quarantined; the same restore once it is back delivers everything. A
// malformed URL is a usage error.
func TestRestoreBrokerDown(t *testing.T) {
	srv := startNATS(t)
	k := startKafka(t)
	dir := dump(t)
	srv.Stop()
	k.Stop()
	for _, to := range []string{srv.URL() + "/orders.redrive", "kafka://" + k.Addr() + "/redrive"} {
		r := run(t, 5, "restore", dir, "--to", to, "--max-attempts", "2", "--retry-base", "10ms", "--retry-max", "20ms", "--timeout", "2s")
		if !strings.Contains(r.stderr, "destination unavailable") || !strings.Contains(r.stderr, "nothing was set aside") {
			t.Fatalf("%s: %s", to, r)
		}
		if q := brokertest.Quarantined(dir); len(q) != 0 {
			t.Fatalf("%s: quarantined %v", to, q)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The client connects at its first attempt: no wait for a reconnection.
	run(t, 0, "restore", dir, "--to", srv.URL()+"/orders.redrive")
	msgs, err := srv.ReadStream("REDRIVE")
	if err != nil {
		t.Fatal(err)
	}
	checkMsgs(t, msgs)

	for _, bad := range []string{"nats://127.0.0.1:1/", "kafka://127.0.0.1/t", "nats://127.0.0.1:1/a.*"} {
		r := run(t, 2, "restore", dir, "--to", bad)
		if !strings.Contains(r.stderr, "want") {
			t.Fatalf("%s: %s", bad, r)
		}
	}
	r := run(t, 2, "restore", dir, "--to", "amqp://127.0.0.1/q")
	if !strings.Contains(r.stderr, "nats://HOST:PORT/SUBJECT") || !strings.Contains(r.stderr, "kafka://") {
		t.Fatalf("the usage error does not name the schemes: %s", r)
	}
}

// job run delivers jobs into their named destinations: a job of "orders"
// into NATS (--dest orders=nats://...), the others into Kafka (--to).
func TestJobRunIntoBrokers(t *testing.T) {
	srv := startNATS(t)
	k := startKafka(t)
	dir := dump(t)
	run(t, 0, "job", "create", dir, "--id", "to-nats", "--dest", "orders", "--where", "source=orders", "--select", `payload ~ "item-0000"`)
	cmd := exec.Command(binary, "job", "run", dir, "--to", "kafka://"+k.Addr()+"/redrive", "--dest", "orders="+srv.URL()+"/orders.redrive", "--lease", "1s", "--poll", "20ms")
	stderr, _ := cmd.StderrPipe()
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
		<-done
	}
	defer stop()
	run(t, 0, "job", "wait", dir, "to-nats", "--timeout", "120s")
	run(t, 0, "job", "create", dir, "--id", "to-kafka")
	run(t, 0, "job", "wait", dir, "to-kafka", "--timeout", "120s")
	stop()
	msgs, err := srv.ReadStream("REDRIVE")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rest, err := k.ReadTopic(ctx, "redrive", n-len(msgs))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 100 || len(rest) != n-100 {
		t.Fatalf("%d records into NATS, %d into Kafka; want 100 and %d\n%s", len(msgs), len(rest), n-100, log.String())
	}
	checkMsgs(t, append(msgs, rest...))
}
