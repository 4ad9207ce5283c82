// Package s3 stores dlqdump segments in an S3 bucket, or any S3-compatible
// server with conditional writes (AWS S3, versitygw, ...).
//
// Writer is a dlqdump.Writer for the dumper Queue; Reader is a dlqdump.Reader
// for the Restorer. Both take an *s3.Client from
// github.com/aws/aws-sdk-go-v2/service/s3 that the caller builds, so the
// credential chain, region, endpoint and HTTP client are the caller's.
// Retries are not: every call is made with the client's retryer limited to
// one attempt, and Writer.Retry / Reader.Retry decide what is repeated and
// how soon (so attempts are not multiplied by two retry layers). For AWS the default config is enough:
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
//	client := awss3.NewFromConfig(cfg)
//
// For an S3-compatible server give its endpoint and use path-style
// addressing (see the package example):
//
//	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
//		o.BaseEndpoint = aws.String("http://127.0.0.1:7070")
//		o.UsePathStyle = true
//	})
//
// # Layout
//
// Under Prefix (e.g. "dlq/orders/"; keep the trailing "/"):
//
//	PREFIX NAME                     segments ready to restore
//	PREFIX quarantine/NAME          segments moved aside (x-amz-meta-dlqdump-reason says why)
//	PREFIX archive/NAME             restored segments, when archiving is on
//	PREFIX .claims/NAME.claim       restore claims and checkpoints (JSON)
//
// NAME is made by segment.FileName: names sort by creation time, so a
// listing is oldest first, and carry 64 random bits, so writers on many hosts
// never collide. Segments and new claims are written with If-None-Match: *,
// claims are renewed, released and taken over with If-Match, so a retried
// request never overwrites or duplicates anything and two restorers never
// hold one segment. The server must support these conditional writes (AWS S3
// and versitygw do; gofakes3 does on PutObject but not on
// CompleteMultipartUpload).
//
// # Publishing
//
// The Writer publishes a sealed segment atomically (one PutObject, or a
// completed multipart upload above Writer.MultipartThreshold) from a
// background goroutine, so S3 latency and outages do not stall the dumper:
// Commit hands the segment to a bounded spool, in memory or, with
// Writer.SpoolDir, on local disk where it survives restarts. The spool's
// bytes are the Writer's Backlog, which the Queue adds to its Rate and
// backpressure; an Enqueue waiting for room wakes as soon as the spool
// drains.
//
// The Queue owns the Writer: Queue.Flush returns once the flushed segment is
// uploaded, and Queue.Close and Shutdown close the Writer and return once
// every segment is uploaded, or, at Shutdown's deadline, with a
// *dlqdump.ShutdownError counting the records not uploaded (lost with a
// memory spool, held for the next start with SpoolDir). Queue.Stats tells the
// committed segments from the stored ones. Closing the Writer yourself is not
// needed, and harmless after the Queue.
//
// A process killed during a multipart upload leaves it unfinished, and S3
// keeps (and bills) its parts until it is aborted. Writer.Recover, which
// dlqdump.NewQueue calls, aborts the unfinished uploads of segments under
// Prefix that are older than Writer.AbortUploadsAfter (an hour) by the
// server's clock; a live Writer whose upload is aborted uploads the segment
// again. Add a bucket lifecycle rule as well, for prefixes no Writer starts
// on again:
//
//	{"Rules": [{"ID": "dlqdump-incomplete-uploads", "Status": "Enabled", "Filter": {"Prefix": "dlq/"},
//	  "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]}
//
// # Durable mode
//
// With S3, Durable (dlqdump.Config.Durable) means durable on the local disk:
// it requires Writer.SpoolDir, where the Queue's Sync calls fsync; the
// segment reaches S3 later, after a crash by Writer.Recover. Without
// SpoolDir, dlqdump.NewQueue refuses a Durable config with an error wrapping
// dlqdump.ErrConfig that names s3.Writer.SpoolDir.
//
// # Retries
//
// Transient failures (5xx, SlowDown and other throttling, timeouts,
// refused or reset connections) are retried with exponential backoff and
// full jitter (see Retry); the client's own retryer is held to one attempt
// per call. Background uploads are retried until they succeed or the Writer
// is closed. Errors of S3 calls are *OpError values naming the operation,
// bucket and key.
//
// A Writer and a Reader may share one client: each makes its own copy of it
// (one attempt per call), sharing no mutable state with the caller's.
package s3
