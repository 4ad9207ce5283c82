package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// The conditional requests the records and Move rely on, as each server
// implements them: If-None-Match: * and If-Match on PutObject (records must
// have them), If-None-Match: * on CompleteMultipartUpload (the Writer's
// multipart uploads), and, logged, whether DeleteObject honours If-Match
// and CopyObject If-None-Match (where they do not, DeleteRecord is
// unconditional and Move relies on its HeadObject alone).
func TestServerConditionalWrites(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		key := e.prefix + "cond"
		put := func(body string, mod func(*awss3.PutObjectInput)) (string, error) {
			in := &awss3.PutObjectInput{Bucket: &e.bucket, Key: &key, Body: strings.NewReader(body)}
			if mod != nil {
				mod(in)
			}
			out, err := e.client.PutObject(ctx, in)
			if err != nil {
				return "", err
			}
			return aws.ToString(out.ETag), nil
		}
		ifNone := func(in *awss3.PutObjectInput) { in.IfNoneMatch = aws.String("*") }
		etag, err := put("v1", ifNone)
		if err != nil {
			t.Fatalf("If-None-Match on a new key: %v", err)
		}
		if _, err := put("v2", ifNone); !isPrecondition(err) {
			t.Fatalf("If-None-Match on an existing key = %v, want 412", err)
		}
		if _, err := put("v2", func(in *awss3.PutObjectInput) { in.IfMatch = aws.String(`"0123456789abcdef0123456789abcdef"`) }); !isPrecondition(err) {
			t.Fatalf("If-Match with a wrong ETag = %v, want 412", err)
		}
		etag2, err := put("v2", func(in *awss3.PutObjectInput) { in.IfMatch = &etag })
		if err != nil {
			t.Fatalf("If-Match with the right ETag: %v", err)
		}
		if _, err := put("v3", func(in *awss3.PutObjectInput) { in.IfMatch = &etag }); !isPrecondition(err) {
			t.Fatalf("If-Match with a stale ETag = %v, want 412", err)
		}
		if got, _ := e.get(t, "cond"); string(got) != "v2" {
			t.Fatalf("object = %q, want v2", got)
		}
		missing := e.prefix + "cond-missing"
		if _, err := e.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &e.bucket, Key: &missing, Body: strings.NewReader("x"), IfMatch: &etag2}); !isPrecondition(err) && !isNotFound(err) {
			t.Fatalf("If-Match on a missing key = %v, want 412 or 404", err)
		}

		// Multipart: complete with If-None-Match onto an existing key.
		up, err := e.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &e.bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		part, err := e.client.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &e.bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("multipart")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &e.bucket, Key: &key, UploadId: up.UploadId, IfNoneMatch: aws.String("*"),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
		got, _ := e.get(t, "cond")
		switch {
		case isPrecondition(err) && string(got) == "v2":
			t.Logf("%s: CompleteMultipartUpload honours If-None-Match", e.srv.Name)
		case err == nil && string(got) == "multipart" && e.srv.Name == "gofakes3":
			t.Logf("%s: CompleteMultipartUpload ignores If-None-Match (a retried multipart upload may overwrite its own object there)", e.srv.Name)
		default:
			t.Fatalf("CompleteMultipartUpload with If-None-Match onto an existing key = %v, object %q", err, got)
		}

		// CopyObject with If-None-Match onto an existing key.
		e.put(t, "cond-src", []byte("copied"))
		e.put(t, "cond-dst", []byte("there"))
		dst := e.prefix + "cond-dst"
		_, err = e.client.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: &e.bucket, Key: &dst, CopySource: aws.String(e.bucket + "/" + e.prefix + "cond-src"), IfNoneMatch: aws.String("*")})
		got, _ = e.get(t, "cond-dst")
		switch {
		case isPrecondition(err) && string(got) == "there":
			t.Logf("%s: CopyObject honours If-None-Match", e.srv.Name)
		case err == nil && string(got) == "copied":
			t.Logf("%s: CopyObject ignores If-None-Match (s3.Reader.Move relies on its HeadObject of the destination)", e.srv.Name)
		default:
			t.Fatalf("CopyObject with If-None-Match onto an existing key = %v, object %q", err, got)
		}

		// DeleteObject with a wrong If-Match.
		if deleteHonoursIfMatch(t, e) {
			t.Logf("%s: DeleteObject honours If-Match", e.srv.Name)
		} else {
			t.Logf("%s: DeleteObject ignores If-Match (s3.Reader.DeleteRecord is unconditional there)", e.srv.Name)
		}
	})
}

func isPrecondition(err error) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 412
}

func isNotFound(err error) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 404
}

// writeSegment stores a small ready segment directly and returns its name.
func (e *env) writeSegment(t *testing.T) string {
	t.Helper()
	name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("a record"))
	e.put(t, name, data)
	return name
}

// A record is the object PREFIX.claims/NAME.claim holding its bytes, its
// version the object's ETag; it is not a segment, and other keys under
// .claims/ are not records.
func TestRecordObject(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		name := e.writeSegment(t)
		r := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry}
		v, err := r.WriteRecord(ctx, name, []byte(`{"v":2,"rev":1}`), "")
		if err != nil {
			t.Fatal(err)
		}
		key := s3.ClaimsPrefix + name + s3.ClaimSuffix
		if body, err := e.get(t, key); err != nil || string(body) != `{"v":2,"rev":1}` {
			t.Fatalf("record object holds %q (%v)", body, err)
		}
		k := e.prefix + key
		head, err := e.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &e.bucket, Key: &k})
		if err != nil || aws.ToString(head.ETag) != v {
			t.Fatalf("record object's ETag %q (%v), WriteRecord returned %q", aws.ToString(head.ETag), err, v)
		}
		e.put(t, s3.ClaimsPrefix+"README.txt", []byte("not a record"))
		e.put(t, s3.ClaimsPrefix+name+".tmp", []byte("not a record"))
		var names []string
		for n, err := range r.RecordNames(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if !slices.Equal(names, []string{name}) {
			t.Fatalf("RecordNames = %q, want %q", names, name)
		}
		var listed []string
		for si, err := range r.List(ctx, sink.AreaReady) {
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, si.Name)
		}
		if !slices.Equal(listed, []string{name}) {
			t.Fatalf("List(ready) = %q, want only the segment", listed)
		}
		// Listed page by page.
		want := []string{name}
		for i := range 7 {
			n := segment.FileName(time.Now().Add(time.Duration(i+1)*time.Second), segment.NewID(time.Now()))
			if _, err := r.WriteRecord(ctx, n, []byte("x"), ""); err != nil {
				t.Fatal(err)
			}
			want = append(want, n)
		}
		slices.Sort(want)
		paged := &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, ListPageSize: 3, Retry: fastRetry}
		names = names[:0]
		for n, err := range paged.RecordNames(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if !slices.Equal(names, want) {
			t.Fatalf("RecordNames in pages of 3 = %q, want %q", names, want)
		}
		// An object larger than a record is refused when read.
		e.put(t, key, bytes.Repeat([]byte("x"), sink.MaxRecordSize+1))
		if _, _, err := r.ReadRecord(ctx, name); err == nil || errors.Is(err, sink.ErrNotFound) {
			t.Fatalf("ReadRecord of an object of %d bytes = %v, want an error", sink.MaxRecordSize+1, err)
		}
	})
}

// Records stay compare-and-swap when requests fail, time out, or take effect
// while the client sees an error: of 16 concurrent creations at most one
// reports success and then the record is its own; a write whose answer was
// lost is found by reading the record back (as the claim protocol does),
// and a chain of such writes loses none.
func TestRecordsUnderFaults(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, 3*time.Minute)
		p := newProxy(t, e.srv.Endpoint)
		// The client's own retries are off so that faults reach our code.
		client := e.clientFor(p.URL(), func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		retry := s3.Retry{MaxAttempts: 30, BaseDelay: 2 * time.Millisecond, MaxDelay: 20 * time.Millisecond, AttemptTimeout: 400 * time.Millisecond}
		r := &s3.Reader{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: retry}
		// write writes data on version v and returns the new version, reading
		// the record back after an error to find a write that took effect.
		write := func(name string, data []byte, v string) (string, error) {
			nv, err := r.WriteRecord(ctx, name, data, v)
			if err == nil {
				return nv, nil
			}
			got, cur, rerr := r.ReadRecord(ctx, name)
			if rerr == nil && bytes.Equal(got, data) {
				return cur, nil // ours, its answer lost
			}
			return "", err
		}
		for round := range 3 {
			name := e.writeSegment(t)
			p.setFaults(0.3, 600*time.Millisecond)
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				won    []int
				other  []error
				start  = make(chan struct{})
				racers = 16
			)
			for i := range racers {
				wg.Go(func() {
					<-start
					_, err := r.WriteRecord(ctx, name, fmt.Appendf(nil, "racer %d", i), "")
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won = append(won, i)
					case !errors.Is(err, sink.ErrConflict):
						other = append(other, err)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(other) > 0 {
				t.Fatalf("round %d: WriteRecord failed with %v", round, other)
			}
			if len(won) > 1 {
				t.Fatalf("round %d: %d creations of one record succeeded (racers %v), want at most 1", round, len(won), won)
			}
			data, v, err := r.ReadRecord(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			var holder int
			if _, err := fmt.Sscanf(string(data), "racer %d", &holder); err != nil {
				t.Fatalf("round %d: record %q is no racer's", round, data)
			}
			if len(won) == 1 && won[0] != holder {
				t.Fatalf("round %d: racer %d's creation succeeded, the record is racer %d's", round, won[0], holder)
			}
			// The holder goes on, whatever it was told.
			for j := range 10 {
				next := fmt.Appendf(nil, "racer %d write %d", holder, j)
				if v, err = write(name, next, v); err != nil {
					t.Fatalf("round %d: write %d: %v", round, j, err)
				}
			}
			p.setFaults(0, 0)
			if body, _ := e.get(t, s3.ClaimsPrefix+name+s3.ClaimSuffix); string(body) != fmt.Sprintf("racer %d write 9", holder) {
				t.Fatalf("round %d: record object %q, want racer %d's tenth write", round, body, holder)
			}
		}
		t.Logf("faults injected: %v", p.injectedCount())
	})
}
