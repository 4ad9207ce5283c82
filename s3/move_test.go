package s3_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Move never overwrites an object at the destination (issue 11, defect 5:
// it used to copy over it): another object there, put by anyone, with or
// without dlqdump's checksum, of the same size or not, makes Move fail with
// sink.ErrExist, and both objects keep their bytes and metadata.
func TestMoveNeverOverwrites(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		meta := func(key string) map[string]string {
			t.Helper()
			k := e.prefix + key
			out, err := e.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &e.bucket, Key: &k})
			if err != nil {
				t.Fatalf("head %s: %v", key, err)
			}
			return out.Metadata
		}
		for i, there := range []struct {
			area  sink.Area
			how   string
			sized bool // the same size as the segment moved
		}{
			{sink.AreaQuarantine, "reader", false},
			{sink.AreaQuarantine, "put", true},
			{sink.AreaArchive, "reader", true},
			{sink.AreaArchive, "put", false},
			{sink.AreaReady, "put", true},
		} {
			created := time.Now().Add(time.Duration(i) * time.Millisecond)
			name, data := buildSegment(t, created, segment.CodecNone, []byte("the segment moved"))
			other := bytes.Repeat([]byte("o"), len(data)+1)
			if there.sized {
				other = other[:len(data)]
			}
			from := sink.AreaReady
			if there.area == sink.AreaReady {
				from = sink.AreaArchive
			}
			fromKey, thereKey := areaKey(from, name), areaKey(there.area, name)
			sw, err := r.Create(ctx, from, name) // with dlqdump's checksum
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := sw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			switch there.how {
			case "reader":
				sw, err := r.Create(ctx, there.area, name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sw.Write(other); err != nil {
					t.Fatal(err)
				}
				if err := sw.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if there.area == sink.AreaQuarantine {
					if err := r.Move(ctx, name, sink.AreaQuarantine, sink.AreaQuarantine, "the first one's reason"); err != nil {
						t.Fatal(err)
					}
				}
			case "put":
				e.put(t, thereKey, other)
			}
			before := meta(thereKey)
			err = r.Move(ctx, name, from, there.area, "the second one's reason")
			if !errors.Is(err, sink.ErrExist) {
				t.Fatalf("Move from %s onto an object in %s (%s) = %v, want ErrExist", from, there.area, there.how, err)
			}
			if got, _ := e.get(t, thereKey); !bytes.Equal(got, other) {
				t.Fatalf("Move from %s overwrote the object in %s: it holds %d bytes %.20q", from, there.area, len(got), got)
			}
			if got := meta(thereKey); !mapsEqual(got, before) {
				t.Fatalf("Move from %s changed the metadata of the object in %s: %v, was %v", from, there.area, got, before)
			}
			if got, _ := e.get(t, fromKey); !bytes.Equal(got, data) {
				t.Fatalf("the refused Move changed its source")
			}
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A Move retried after it copied its segment but did not delete the source
// finishes (removes the source) also for objects stored without dlqdump's
// checksum, as other tools store them: their bytes are compared. Other bytes
// of the same size are still refused.
func TestMoveRetryWithoutChecksum(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		for i, c := range []struct {
			srcSum, dstSum bool // stored with dlqdump's checksum
			same           bool
		}{
			{false, false, true},
			{true, false, true},
			{false, true, true},
			{false, false, false},
			{true, false, false},
		} {
			name, data := buildSegment(t, time.Now().Add(time.Duration(i)*time.Millisecond), segment.CodecNone, []byte("copied by another tool"))
			there := data
			if !c.same {
				there = bytes.ToUpper(data) // the same size, other bytes
			}
			store := func(area sink.Area, b []byte, withSum bool) {
				t.Helper()
				if !withSum {
					e.put(t, areaKey(area, name), b)
					return
				}
				sw, err := r.Create(ctx, area, name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sw.Write(b); err != nil {
					t.Fatal(err)
				}
				if err := sw.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			store(sink.AreaReady, data, c.srcSum)
			store(sink.AreaQuarantine, there, c.dstSum)
			err := r.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, "retried")
			switch {
			case c.same && err != nil:
				t.Fatalf("case %d %+v: Move onto the same bytes = %v, want success", i, c, err)
			case c.same && e.exists(t, name):
				t.Fatalf("case %d %+v: Move onto the same bytes left the source", i, c)
			case !c.same && !errors.Is(err, sink.ErrExist):
				t.Fatalf("case %d %+v: Move onto other bytes of the same size = %v, want ErrExist", i, c, err)
			case !c.same && !e.exists(t, name):
				t.Fatalf("case %d %+v: a refused Move removed its source", i, c)
			}
			if got, _ := e.get(t, areaKey(sink.AreaQuarantine, name)); !bytes.Equal(got, there) {
				t.Fatalf("case %d %+v: the destination changed", i, c)
			}
		}
	})
}

// areaKey returns a segment's key under the prefix.
func areaKey(a sink.Area, name string) string {
	switch a {
	case sink.AreaQuarantine:
		return s3.QuarantinePrefix + name
	case sink.AreaArchive:
		return s3.ArchivePrefix + name
	}
	return name
}

// Move is safe to retry when requests fail, time out, or take effect while
// the client sees an error: moved on through quarantine to the archive, each
// segment ends there once, with its bytes, and nowhere else.
func TestMoveUnderFaults(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, 3*time.Minute)
		direct := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		want := map[string][]byte{}
		for i := range 8 {
			name, data := buildSegment(t, time.Now().Add(time.Duration(i)*time.Millisecond), segment.CodecNone, []byte(strings.Repeat("x", i+1)))
			sw, err := direct.Create(ctx, sink.AreaReady, name) // with dlqdump's checksum, as a Writer stores it
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := sw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			want[name] = data
		}
		p := newProxy(t, e.srv.Endpoint)
		client := e.clientFor(p.URL(), func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		// Few attempts, so that some calls give up and are repeated here.
		r := &s3.Reader{Client: client, Bucket: e.bucket, Prefix: e.prefix,
			Retry: s3.Retry{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, AttemptTimeout: 400 * time.Millisecond}}
		p.setFaults(0.3, 600*time.Millisecond)
		repeated := 0
		for name := range want {
			for _, step := range [][2]sink.Area{{sink.AreaReady, sink.AreaQuarantine}, {sink.AreaQuarantine, sink.AreaArchive}} {
				for attempt := 0; ; attempt++ {
					err := r.Move(ctx, name, step[0], step[1], "moved under faults")
					if err == nil || attempt > 0 && errors.Is(err, sink.ErrNotFound) {
						break // moved, by this call or by an earlier one that reported failure
					}
					if errors.Is(err, sink.ErrExist) {
						t.Fatalf("Move of %s from %s to %s after %d failed attempts: %v", name, step[0], step[1], attempt, err)
					}
					if attempt > 50 {
						t.Fatalf("Move of %s keeps failing: %v", name, err)
					}
					repeated++
				}
			}
		}
		p.setFaults(0, 0)
		t.Logf("faults injected: %v; Moves repeated after a failure: %d", p.injectedCount(), repeated)
		for _, a := range []sink.Area{sink.AreaReady, sink.AreaQuarantine} {
			if got := listNames(t, direct, a); len(got) != 0 {
				t.Fatalf("%s still holds %q", a, got)
			}
		}
		got := listNames(t, direct, sink.AreaArchive)
		if len(got) != len(want) {
			t.Fatalf("archive holds %d segments, want %d", len(got), len(want))
		}
		for _, name := range got {
			if body, _ := e.get(t, s3.ArchivePrefix+name); !bytes.Equal(body, want[name]) {
				t.Fatalf("archived %s holds other bytes", name)
			}
		}
	})
}

func listNames(t *testing.T, r *s3.Reader, a sink.Area) []string {
	t.Helper()
	var out []string
	for si, err := range r.List(testCtx(t, time.Minute), a) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, si.Name)
	}
	slices.Sort(out)
	return out
}

// A quarantine reason that is not printable ASCII, or is long, survives the
// trip through object metadata (encoded, and cut at 1 KiB).
func TestQuarantineReasonEncoding(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		reasons := map[string]string{}
		for _, reason := range []string{
			"décodage impossible: «bad» JSON\nline 2\ttab",
			"=?not an encoded word",
			strings.Repeat("long reason ", 200),
		} {
			name := e.writeSegment(t)
			if err := r.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, reason); err != nil {
				t.Fatal(err)
			}
			reasons[name] = reason
		}
		n := 0
		for si, err := range r.List(ctx, sink.AreaQuarantine) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			want := reasons[si.Name]
			if len(want) > 1024 {
				if len(si.Reason) > 1024+3 || !strings.HasPrefix(want, strings.TrimSuffix(si.Reason, "...")) || len(si.Reason) < 1000 {
					t.Fatalf("long reason came back as %d bytes %.60q", len(si.Reason), si.Reason)
				}
				continue
			}
			if si.Reason != want {
				t.Fatalf("reason %q came back as %q", want, si.Reason)
			}
		}
		if n != 3 {
			t.Fatalf("%d quarantined segments listed, want 3", n)
		}
	})
}
