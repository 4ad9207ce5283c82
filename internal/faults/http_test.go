package faults

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

// s3Client returns a client of a fresh gofakes3 whose requests go through
// in, making one attempt per call.
func s3Client(t *testing.T, in *Injector) (*awss3.Client, *s3test.Server) {
	t.Helper()
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return srv.Client(func(o *awss3.Options) {
		o.HTTPClient = &HTTPClient{Inner: o.HTTPClient, Injector: in}
		o.RetryMaxAttempts = 1
	}), srv
}

// Every request of the upload and listing paths is counted under its S3
// operation.
func TestHTTPClientNamesS3Operations(t *testing.T) {
	ctx := context.Background()
	in := New()
	c, srv := s3Client(t, in)
	b, k := aws.String(srv.Bucket), aws.String("p/a.dlq")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: k, Body: strings.NewReader("x")}))
	must(c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: k}))
	must(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: k}))
	must(c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("p/")}))
	must(c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: aws.String("p/b.dlq"), CopySource: aws.String(srv.Bucket + "/p/a.dlq")}))
	mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("p/m.dlq")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: aws.String("p/m.dlq"), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("y")})
	if err != nil {
		t.Fatal(err)
	}
	must(c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: b}))
	must(c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("p/m.dlq"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}}))
	mp2, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("p/n.dlq")})
	if err != nil {
		t.Fatal(err)
	}
	must(c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("p/n.dlq"), UploadId: mp2.UploadId}))
	must(c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: b, Key: k}))
	want := Counts{OpPutObject: 1, OpHeadObject: 1, OpGetObject: 1, OpListObjects: 1, OpCopyObject: 1, OpCreateMultipartUpload: 2,
		OpUploadPart: 1, OpListMultipartUploads: 1, OpCompleteMultipartUpload: 1, OpAbortMultipartUpload: 1, OpDeleteObject: 1}
	if got := in.Counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counted %v\nwant    %v", got, want)
	}
}

// Fail answers 500 without sending the request; Lost sends it and resets the
// connection; the client retries both as transient.
func TestHTTPClientFaults(t *testing.T) {
	ctx := context.Background()
	in := New(Point{Op: OpPutObject, K: 1, Mode: Fail}, Point{Op: OpPutObject, K: 2, Mode: Lost})
	c, srv := s3Client(t, in)
	put := func(key, body string) error {
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &srv.Bucket, Key: aws.String(key), Body: bytes.NewReader([]byte(body))})
		return err
	}
	exists := func(key string) bool {
		_, err := srv.Client().HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &srv.Bucket, Key: aws.String(key)})
		return err == nil
	}
	err := put("a", "1")
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 500 || exists("a") {
		t.Fatalf("failed PUT: %v; stored: %v", err, exists("a"))
	}
	err = put("b", "2")
	if err == nil || !strings.Contains(err.Error(), "connection reset") || !exists("b") {
		t.Fatalf("lost PUT: %v; stored: %v", err, exists("b"))
	}
	if err := put("c", "3"); err != nil {
		t.Fatal(err)
	}
}
