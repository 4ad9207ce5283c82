package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// startUpload starts a multipart upload of key (under the env's prefix) with
// one part, and leaves it unfinished, as a process killed during an upload
// does.
func (e *env) startUpload(t *testing.T, key string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	k := e.prefix + key
	mp, err := e.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &e.bucket, Key: &k})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s: %v", k, err)
	}
	if _, err := e.client.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &e.bucket, Key: &k, UploadId: mp.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("part"))}); err != nil {
		t.Fatalf("UploadPart %s: %v", k, err)
	}
}

// left returns the keys of the unfinished uploads under the env's prefix,
// without it, sorted.
func (e *env) left(t *testing.T) []string {
	t.Helper()
	var keys []string
	for _, k := range e.uploads(t) {
		keys = append(keys, strings.TrimPrefix(k, e.prefix))
	}
	slices.Sort(keys)
	return keys
}

// Issue 11 (enumeration points s3-memory/buffered-multipart at
// s3.UploadPart#2/crash and others): a process killed during a multipart
// upload from a memory spool left the upload unfinished for ever, since the
// next process has nothing to upload again. Recover aborts the unfinished
// uploads of segment keys under its Prefix older than AbortUploadsAfter, and
// nothing else.
func TestRecoverAbortsStaleUploadsOfSegments(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		seg := segment.FileName(time.Now(), segment.NewID(time.Now()))
		e.startUpload(t, seg)
		e.startUpload(t, s3.QuarantinePrefix+seg)
		e.startUpload(t, "notes.txt")     // not a segment
		e.startUpload(t, "sub/"+seg)      // another Writer's Prefix below ours
		e.startUpload(t, ".claims/x.dlq") // not an area
		ctx := testCtx(t, time.Minute)

		// The default (an hour) leaves uploads of a minute ago alone:
		// they may be a live Writer's.
		w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		if _, err := w.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if got := e.left(t); len(got) != 5 {
			t.Fatalf("with the default AbortUploadsAfter, uploads left: %q, want all 5", got)
		}

		w = &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, AbortUploadsAfter: -1}
		if _, err := w.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		want := []string{".claims/x.dlq", "notes.txt", "sub/" + seg}
		if got := e.left(t); !slices.Equal(got, want) {
			t.Fatalf("after Recover with AbortUploadsAfter -1, uploads left: %q, want %q", got, want)
		}
	})
}

// dateShift is an HTTP client whose answers carry a Date the given offset
// from the server's: a server whose clock runs ahead of (or behind) this
// machine's.
type dateShift struct {
	inner  awss3.HTTPClient
	offset time.Duration
}

func (d dateShift) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.inner.Do(req)
	if err == nil {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			resp.Header.Set("Date", t.Add(d.offset).UTC().Format(http.TimeFormat))
		}
	}
	return resp, err
}

// An upload's age is judged by the server's clock (the Date of its answer
// against the upload's Initiated), not by this machine's: with the server's
// Date two hours ahead of its Initiated times, a fresh upload is two hours
// old, and with it an hour behind, a fresh upload is not old at all even
// for an AbortUploadsAfter of a second.
func TestRecoverJudgesUploadAgeByServerClock(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		seg := segment.FileName(time.Now(), segment.NewID(time.Now()))
		e.startUpload(t, seg)
		ctx := testCtx(t, time.Minute)
		// The SDK would sign with the shifted clock (clock skew
		// correction) and versitygw refuse the requests: off.
		behind := e.srv.Client(func(o *awss3.Options) {
			o.HTTPClient, o.DisableClockSkewCorrection = dateShift{o.HTTPClient, -time.Hour}, true
		})
		w := &s3.Writer{Client: behind, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, AbortUploadsAfter: time.Second}
		if _, err := w.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if got := e.left(t); len(got) != 1 {
			t.Fatalf("server's clock an hour behind, AbortUploadsAfter 1s: uploads left %q, want the fresh one", got)
		}
		ahead := e.srv.Client(func(o *awss3.Options) {
			o.HTTPClient, o.DisableClockSkewCorrection = dateShift{o.HTTPClient, 2 * time.Hour}, true
		})
		w = &s3.Writer{Client: ahead, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		if _, err := w.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if got := e.left(t); len(got) != 0 {
			t.Fatalf("server's clock two hours ahead, default AbortUploadsAfter (1h): uploads left %q, want none", got)
		}
	})
}

// gate holds the first UploadPart request until it is opened, and counts
// the CreateMultipartUpload requests.
type gate struct {
	inner   awss3.HTTPClient
	reached chan struct{} // closed when the first UploadPart waits
	open    chan struct{}
	once    sync.Once
	creates atomic.Int32
}

func (g *gate) Do(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	switch {
	case req.Method == http.MethodPost && q.Has("uploads"):
		g.creates.Add(1)
	case req.Method == http.MethodPut && q.Has("partNumber"):
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.reached)
			select {
			case <-g.open:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	return g.inner.Do(req)
}

// A live Writer whose multipart upload another process's Recover aborts
// (AbortUploadsAfter shorter than the upload, here negative) uploads the
// segment again: every record stored once, no upload left, Close nil.
func TestLiveUploadAbortedByRecoverIsUploadedAgain(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		g := &gate{reached: make(chan struct{}), open: make(chan struct{})}
		client := e.srv.Client(func(o *awss3.Options) { g.inner = o.HTTPClient; o.HTTPClient = g })
		retry := fastRetry
		retry.AttemptTimeout = 5 * time.Minute // the held part must not time out
		live := &s3.Writer{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: retry, MultipartThreshold: 1}
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: live, Capacity: 64 * dlqdump.Kilobyte, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 100 {
			want = append(want, fmt.Sprintf("record %d", i))
			if err := q.Enqueue(want[i]); err != nil {
				t.Fatal(err)
			}
		}
		flushed := make(chan error, 1)
		go func() { flushed <- q.Flush(testCtx(t, 5*time.Minute)) }()
		<-g.reached // the live upload is under way, its first part held

		other := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, AbortUploadsAfter: -1}
		oq, err := dlqdump.NewQueue(&dlqdump.Config{Writer: other, Capacity: 64 * dlqdump.Kilobyte})
		if err != nil {
			t.Fatal(err)
		}
		if err := oq.Close(); err != nil {
			t.Fatal(err)
		}
		if got := e.left(t); len(got) != 0 {
			t.Fatalf("the other Queue's Recover left uploads %q, want the live one aborted", got)
		}

		close(g.open)
		if err := <-flushed; err != nil {
			t.Fatalf("Flush of the live Queue: %v", err)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close of the live Queue: %v", err)
		}
		if n := g.creates.Load(); n < 2 {
			t.Fatalf("%d CreateMultipartUpload requests, want the aborted upload made again", n)
		}
		readArea(t, &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix}, sink.AreaReady).wantExactlyOnce(t, want)
		if got := e.left(t); len(got) != 0 {
			t.Fatalf("uploads left: %q", got)
		}
	})
}

// When Recover fails after the Writer started its uploader (here a segment
// left open in the spool directory cannot be published: a directory has its
// name), NewQueue fails and, owning the Writer, closes it: the uploader
// stops, and the Writer refuses work. It ran on before, with nothing to stop
// it.
func TestNewQueueClosesWriterWhoseRecoverFailed(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		dir := t.TempDir()
		name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("one"))
		if err := os.WriteFile(filepath.Join(dir, "."+name+".open"), data, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, name), 0o750); err != nil {
			t.Fatal(err)
		}
		w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, SpoolDir: dir}
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 64 * dlqdump.Kilobyte})
		if err == nil {
			q.Close()
			t.Fatal("NewQueue succeeded with a segment left open that cannot be published")
		}
		other := segment.FileName(time.Now(), segment.NewID(time.Now()))
		if _, cerr := w.Create(testCtx(t, time.Minute), other); !errors.Is(cerr, dlqdump.ErrClosed) {
			t.Fatalf("after NewQueue failed (%v), Writer.Create = %v, want ErrClosed: the Writer runs on", err, cerr)
		}
	})
}
