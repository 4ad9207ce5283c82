package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// uiRun is a running dlqdump ui.
type uiRun struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once stderr is read to its end
	mu   sync.Mutex
	log  strings.Builder
}

// stderr returns what it printed on stderr.
func (u *uiRun) stderr() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.log.String()
}

// startUI starts dlqdump ui on a free port and returns its URL; the test
// interrupts it.
func startUI(t *testing.T, args ...string) (string, *uiRun) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"ui", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = baseEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	u := &uiRun{cmd: cmd, done: make(chan struct{})}
	sc := bufio.NewScanner(stderr)
	at := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/)`)
	for sc.Scan() {
		u.log.WriteString(sc.Text() + "\n")
		if m := at.FindStringSubmatch(sc.Text()); m != nil {
			go func() { // the rest of stderr: the log of changes
				defer close(u.done)
				for sc.Scan() {
					u.mu.Lock()
					u.log.WriteString(sc.Text() + "\n")
					u.mu.Unlock()
				}
			}()
			return m[1], u
		}
	}
	t.Fatalf("dlqdump ui printed no address:\n%s", u.log.String())
	return "", nil
}

func getUI(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}

func postUI(t *testing.T, url string, hdr map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"all":true}`))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// stopUI interrupts dlqdump ui and checks that it ends as interrupted.
func stopUI(t *testing.T, u *uiRun) {
	t.Helper()
	if err := u.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-u.done
	err := u.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Errorf("dlqdump ui ended with %v, want exit status %d", err, exitInterrupted)
	}
}

// dlqdump ui serves the console of a dump on loopback: protobuf payloads as
// protojson given a descriptor set, changes refused without the page's
// token or from another origin, everything refused with --read-only.
func TestUI(t *testing.T) {
	dir, desc := protoSample(t)
	url, u := startUI(t, dir, "--proto-descriptor", desc, "--proto-message", "google.protobuf.Method")
	var page struct {
		Records []struct {
			Payload struct{ Kind, Text string }
		}
	}
	if code := getUI(t, url+"api/records", &page); code != http.StatusOK || len(page.Records) != 3 {
		t.Fatalf("GET api/records: %d, %+v", code, page)
	}
	if p := page.Records[0].Payload; p.Kind != "protojson" || !strings.Contains(p.Text, `"name":"CreateOrder"`) {
		t.Errorf("the first payload shows as %+v, want protojson", p)
	}
	if p := page.Records[2].Payload; p.Kind != "hex" {
		t.Errorf("a payload that is not the message shows as %+v, want hex", p)
	}
	var meta struct {
		Token    string `json:"token"`
		ReadOnly bool   `json:"read_only"`
	}
	getUI(t, url+"api/meta", &meta)
	if meta.Token == "" || meta.ReadOnly {
		t.Fatalf("meta: %+v", meta)
	}
	if code := postUI(t, url+"api/release", nil); code != http.StatusForbidden {
		t.Errorf("a POST without the token: %d, want 403", code)
	}
	if code := postUI(t, url+"api/release", map[string]string{"X-Dlqdump-Token": meta.Token, "Origin": "https://evil.example"}); code != http.StatusForbidden {
		t.Errorf("a POST from another origin: %d, want 403", code)
	}
	if code := postUI(t, url+"api/release", map[string]string{"X-Dlqdump-Token": meta.Token}); code != http.StatusOK {
		t.Errorf("the page's POST: %d, want 200", code)
	}
	// A page of another site whose name resolves to 127.0.0.1 (DNS
	// rebinding) is of the console's origin: it is refused by its Host.
	req, _ := http.NewRequest(http.MethodGet, url+"api/meta", nil)
	req.Host = "rebind.example" + url[strings.LastIndex(url, ":"):len(url)-1]
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET api/meta for Host %s: %d, want 421", req.Host, resp.StatusCode)
	}
	stopUI(t, u)
	if !strings.Contains(u.stderr(), "console: release: released 0 of 0") {
		t.Errorf("the change is not logged:\n%s", u.stderr())
	}

	url, u = startUI(t, dir, "--read-only")
	meta.Token, meta.ReadOnly = "", false
	getUI(t, url+"api/meta", &meta)
	if !meta.ReadOnly || meta.Token != "" {
		t.Errorf("read-only meta: %+v", meta)
	}
	if code := postUI(t, url+"api/release", map[string]string{"X-Dlqdump-Token": "x"}); code != http.StatusForbidden {
		t.Errorf("a POST to a read-only console: %d, want 403", code)
	}
	stopUI(t, u)
}
