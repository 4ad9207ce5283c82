package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// stallProxy forwards requests to an S3 server, except the ranged GETs of
// one segment's bytes from offset from on, which it holds until released.
type stallProxy struct {
	*httptest.Server
	release chan struct{}
	rel     sync.Once
}

func newStallProxy(t *testing.T, endpoint, name string, from int64) *stallProxy {
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{release: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		// A client that went away (the interrupted copy) is what these
		// tests do: not logged as "http: proxy error: context canceled".
		if r.Context().Err() == nil {
			log.Printf("stall proxy: %v", err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var start int64
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+name) {
			if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start); err == nil && start >= from {
				select {
				case <-p.release:
				case <-r.Context().Done():
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.unstall()
		p.Close()
	})
	return p
}

func (p *stallProxy) unstall() { p.rel.Do(func() { close(p.release) }) }

// bigSegment is a ready segment of about 1.6 MB (random, incompressible
// payloads in 64 KiB blocks), larger than the 1 MiB a copy reads at a time.
func bigSegment() segSpec {
	s := segSpec{area: sink.AreaReady, created: t0.Add(-time.Hour), id: 0xbb, version: segA.version, codec: segment.CodecZstd, blockSize: 64 << 10}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1600 {
		p := make([]byte, 1000)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		copy(p, fmt.Sprintf("big-%d-", i))
		s.records = append(s.records, rec{s.created.Add(time.Duration(i) * time.Millisecond), map[string]string{"reason": "failed"}, p})
	}
	return s
}

// TestCopyInterruptedFromS3 is issue 12 defect 11: cp and mv from S3 into a
// directory, killed while copying a segment larger than what a copy reads at
// once (its first MiB written into the directory, the rest not read yet).
// Before, the copy's temporary file (".NAME.dlq.open", the Queue's kind)
// stayed: every later copy failed with "file exists", and the next restore
// there, even a dry run, published the partial copy, whose records were then
// in both places and delivered twice. Now: nothing is published in part, a
// dry run changes nothing, the copy run again completes, and a restore
// delivers every record once.
func TestCopyInterruptedFromS3(t *testing.T) {
	for _, verb := range []string{"cp", "mv"} {
		t.Run(verb, func(t *testing.T) {
			srv := fakeS3
			src := t.TempDir()
			big := bigSegment()
			writeSegment(t, src, big)
			writeSegment(t, src, segB)
			orig, _ := os.ReadFile(segPath(src, sink.AreaReady, big.name()))
			loc := "s3://" + srv.Bucket + "/dlqdump-cli/" + strings.ReplaceAll(t.Name(), "/", "-") + "/"
			cliS3(t, srv, 0, "cp", src, loc)

			proxy := newStallProxy(t, srv.Endpoint, big.name(), 1<<20)
			env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
				"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL=" + proxy.URL}
			dst := filepath.Join(t.TempDir(), "dst")
			args := []string{verb, loc, dst}
			if verb == "mv" {
				// The killed mv's claim is taken over after this lease.
				args = append(args, "--lease", "1s")
			}
			cmd := exec.Command(binary, args...)
			cmd.Env = append(baseEnv(), env...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			// Wait until the first MiB of the big segment is in dst; the
			// copy then waits for the rest, which the proxy holds.
			var temp string
			for temp == "" {
				for p, content := range tree(t, dst) {
					if b := filepath.Base(p); strings.HasPrefix(b, ".") && strings.Contains(b, big.name()) && len(content) >= 1<<20 {
						temp = p
					}
				}
				select {
				case <-exited:
					t.Fatalf("%s ended before it was interrupted", verb)
				case <-time.After(10 * time.Millisecond):
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited
			t.Logf("the killed %s left %s", verb, temp)
			if n := areaNames(t, dst, sink.AreaReady); len(n) > 0 {
				t.Errorf("the killed %s published %v", verb, n)
			}

			// A dry run changes nothing: the partial copy is not published.
			before := tree(t, dst)
			r := cli(t, -1, "restore", dst, "--dry-run")
			if d := treeDiff(before, tree(t, dst)); d != "" {
				t.Errorf("restore --dry-run after the interrupted %s changed the directory: %s; %s", verb, d, r)
			}

			// Run again: it completes.
			proxy.unstall()
			r = cliEnv(t, env, -1, args...)
			if r.code != 0 {
				t.Fatalf("%s run again after the interruption; %s", verb, r)
			}
			checkSameSegment(t, segPath(dst, sink.AreaReady, big.name()), orig)
			for p := range tree(t, dst) {
				if b := filepath.Base(p); strings.HasPrefix(b, ".") && (strings.HasSuffix(b, ".dlq.part") || strings.HasSuffix(b, ".dlq.open")) {
					t.Errorf("temporary file left: %s", p)
				}
			}
			if verb == "mv" {
				if ls := cliEnv(t, env, 0, "ls", loc, "--json").stdout; ls != "" {
					t.Errorf("segments left on S3 after mv: %s", ls)
				}
			}

			// Every record is delivered once.
			tg := newTarget(t, nil)
			cli(t, 0, "restore", dst, "--to", tg.URL)
			got := tg.deliveredNow()
			if want := len(big.records) + len(segB.records); len(got) != want {
				t.Errorf("delivered %d records, want %d", len(got), want)
			}
			twice := 0
			for _, n := range got {
				if n != 1 {
					twice++
				}
			}
			if twice > 0 {
				t.Errorf("%d records delivered more than once", twice)
			}
		})
	}
}

// tree returns every file and directory under dir with its content, so
// that two calls tell whether anything changed.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			m[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m[rel] = string(b)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return m
}

// treeDiff describes how two trees differ.
func treeDiff(before, after map[string]string) string {
	var d []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, "changed "+k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	return strings.Join(d, ", ")
}
