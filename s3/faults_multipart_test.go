package s3_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/segment"
)

// uploads lists the unfinished multipart uploads under the env's prefix.
func (e *env) uploads(t *testing.T) []string {
	t.Helper()
	out, err := e.client.ListMultipartUploads(testCtx(t, 30*time.Second), &awss3.ListMultipartUploadsInput{Bucket: &e.bucket, Prefix: &e.prefix})
	if err != nil {
		if code := apiErrorCode(err); code == "NoSuchUpload" {
			return nil // gofakes3 before the bucket's first upload
		}
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}

func apiErrorCode(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Found by the fault enumeration (internal/faults/dumpfaults, point
// s3.CreateMultipartUpload#1/lost): a CreateMultipartUpload that took effect
// and whose answer was lost is retried with a new upload, and the first one,
// whose id the Writer never saw, is left unfinished: its parts are kept (and
// billed) until a lifecycle rule removes them. Nothing may be left behind.
func TestFaultsLostCreateMultipartUploadLeavesNoUpload(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		in := faults.New(faults.Point{Op: faults.OpCreateMultipartUpload, K: 1, Mode: faults.Lost})
		client := e.srv.Client(func(o *awss3.Options) { o.HTTPClient = &faults.HTTPClient{Inner: o.HTTPClient, Injector: in} })
		w := &s3.Writer{Client: client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, MultipartThreshold: 1}
		ctx := testCtx(t, time.Minute)
		name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("one"), []byte("two"))
		sw, err := w.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, sw, data)
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if len(in.Fired()) != 1 {
			t.Fatalf("the fault did not hit: %v", in.Counts())
		}
		if got, err := e.get(t, name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("segment not stored whole: %v", err)
		}
		if left := e.uploads(t); len(left) > 0 {
			t.Fatalf("unfinished multipart uploads left: %q", left)
		}
	})
}

// Found by the fault enumeration (points s3.UploadPart#1/crash,
// s3.CompleteMultipartUpload#1/crash, ...): a process that dies during a
// multipart upload leaves it unfinished; the next start uploads the spooled
// segment again, and the dead process's upload stays forever. Here the dead
// process is played by an upload started on the segment's key and a spool
// directory holding the segment.
func TestFaultsRecoverLeavesNoUploadOfCrashedProcess(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		ctx := testCtx(t, time.Minute)
		dir := t.TempDir()
		name, data := buildSegment(t, time.Now(), segment.CodecZstd, []byte("one"), []byte("two"))
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
			t.Fatal(err)
		}
		key := e.prefix + name
		mp, err := e.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &e.bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &e.bucket, Key: &key, UploadId: mp.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
		w := &s3.Writer{Client: e.client, Bucket: e.bucket, Prefix: e.prefix, Retry: fastRetry, MultipartThreshold: 1, SpoolDir: dir}
		if _, err := w.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if got, err := e.get(t, name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("segment not stored whole: %v", err)
		}
		if left := e.uploads(t); len(left) > 0 {
			t.Fatalf("unfinished multipart uploads left after the restart: %q", left)
		}
	})
}
