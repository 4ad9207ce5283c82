package s3_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/sink"
)

// Build a client for an S3-compatible server (versitygw, MinIO, Ceph, ...):
// its endpoint, path-style addressing, and credentials from the usual chain
// (environment, shared config, instance role) or given here. For AWS S3 drop
// BaseEndpoint and UsePathStyle.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		// Only when the credential chain does not provide them:
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("ACCESS_KEY", "SECRET_KEY", "")),
	)
	if err != nil {
		log.Fatal(err)
	}
	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String("http://127.0.0.1:7070")
		o.UsePathStyle = true
	})

	// Dump: the Writer uploads sealed segments in the background; the Queue
	// owns it.
	w := &s3.Writer{Client: client, Bucket: "dead-letters", Prefix: "orders/", SpoolDir: "/var/lib/app/dlq-spool"}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 32 * dlqdump.Megabyte})
	if err != nil {
		log.Fatal(err)
	}
	_ = q.Enqueue("a dead letter")
	// Shutdown returns once every segment is uploaded, or at the deadline
	// with a *dlqdump.ShutdownError counting what is not (with SpoolDir,
	// held there for the next start).
	closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := q.Shutdown(closeCtx); err != nil {
		log.Print(err)
	}

	// Restore: the Reader is where a Restorer finds the segments.
	r := &s3.Reader{Client: client, Bucket: "dead-letters", Prefix: "orders/"}
	for si, err := range r.List(ctx, sink.AreaReady) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(si.Name, si.Size)
	}
}

// docs/S3.md's snippet, as a program runs it: the client, the dump and the
// Reader a Restorer uses. The deferred Close is all a program must call
// before it exits: the Queue closes its Writer once every segment is
// uploaded.
func Example_readme() {
	ctx := context.Background()
	// The program's config, as config.LoadDefaultConfig(ctx) returns it,
	// and the endpoint of an S3-compatible server: here an in-process one.
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(fakeServer.AccessKey, fakeServer.SecretKey, "")}
	endpoint := fakeServer.Endpoint
	if _, err := fakeServer.Client().CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("dead-letters")}); err != nil {
		log.Fatal(err)
	}
	program := func() *s3.Reader {
		// README:begin
		client := awss3.NewFromConfig(cfg, func(o *awss3.Options) { // github.com/aws/aws-sdk-go-v2/service/s3
			o.BaseEndpoint = aws.String(endpoint) // for S3-compatible servers, e.g. "http://127.0.0.1:7070"
			o.UsePathStyle = true
		})
		dump, err := dlqdump.NewQueue(&dlqdump.Config{
			Capacity: 32 * dlqdump.Megabyte,
			Writer:   &s3.Writer{Client: client, Bucket: "dead-letters", Prefix: "orders/"},
		})
		if err != nil {
			log.Fatal(err)
		}
		defer func() {
			// Returns once every segment is in the bucket (it closes the
			// Writer): nothing else to call before the program exits.
			if err := dump.Close(); err != nil {
				log.Print(err) // what is not uploaded, and why
			}
		}()
		r := &s3.Reader{Client: client, Bucket: "dead-letters", Prefix: "orders/"} // where a Restorer finds them; may share the client
		// README:end
		for i := range 1000 {
			if err := dump.Enqueue(fmt.Sprintf("dead letter %d", i)); err != nil {
				log.Fatal(err)
			}
		}
		return r
	}
	r := program()
	// After the program's end: what a Restorer finds in the bucket.
	rs, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: r, Decoder: decoder.Fallthrough{}, Queue: discard{}})
	if err != nil {
		log.Fatal(err)
	}
	defer rs.Close()
	rep, err := rs.Run(ctx, dlqdump.RunOptions{DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("records in the bucket:", rep.Delivered)
	// Output: records in the bucket: 1000
}

// discard accepts everything.
type discard struct{}

func (discard) Enqueue(any) error { return nil }

// The Writer's backlog is what is committed but not yet in S3; the Queue
// adds it to its Rate, so a dashboard or the source queue sees an outage.
// Queue.Close returns once the backlog is uploaded: the Queue closes the
// Writer.
func ExampleWriter_Backlog() {
	w := &s3.Writer{Client: fakeServer.Client(), Bucket: fakeServer.Bucket, Prefix: "example/"}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 4 * dlqdump.Megabyte, MaxPending: 64 * dlqdump.Megabyte})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 1000 {
		_ = q.Enqueue(fmt.Sprintf("dead letter %d", i))
	}
	if err := q.Close(); err != nil {
		log.Fatal(err)
	}
	st := q.Stats()
	fmt.Println("uploaded:", w.Stats().Uploaded, "backlog:", w.Backlog(), "committed:", st.Segments, "stored:", st.Stored)
	// Output:
	// uploaded: 1 backlog: 0 committed: 1 stored: 1
}
