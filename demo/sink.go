package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/s3"
	dsink "github.com/dlqdump/dlqdump/sink"
)

// sink is where the dump's segments go and where the Restorer finds them.
type sink struct {
	desc string // a path or an s3:// URL, for people
	dir  string // the fs directory, "" for S3
	temp bool   // dir was made by the demo
	// newWriter returns a Writer for a scene's Queue: a new one each
	// time, since the Queue owns its Writer and closes it (an s3.Writer
	// closed by one scene's Queue takes no more segments).
	newWriter func() dlqdump.Writer
	reader    dlqdump.Reader
}

// newFSSink returns a local directory sink; dir "" makes a temporary one.
func newFSSink(dir string) (*sink, error) {
	temp := false
	if dir == "" {
		d, err := os.MkdirTemp("", "dlqdump-demo-")
		if err != nil {
			return nil, err
		}
		dir, temp = d, true
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	return &sink{desc: dir, dir: dir, temp: temp, newWriter: func() dlqdump.Writer { return &fs.Writer{Directory: dir} },
		reader: &fs.Reader{Directory: dir}}, nil
}

// s3Options are the -s3* flags.
type s3Options struct {
	URL       string // s3://bucket/prefix
	Endpoint  string // S3-compatible server; default AWS (or AWS_ENDPOINT_URL)
	Region    string // default AWS_REGION, else us-east-1
	AccessKey string // default: the AWS credential chain (AWS_ACCESS_KEY_ID, ...)
	SecretKey string
	PathStyle bool   // path-style addressing; on with -s3-endpoint
	SpoolDir  string // local spool for segments not yet uploaded; default memory
}

// parseS3URL splits s3://bucket/prefix.
func parseS3URL(s string) (bucket, prefix string, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("-s3 %q: want s3://bucket/prefix", s)
	}
	prefix = strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return u.Host, prefix, nil
}

// newS3Sink returns a sink in an S3 bucket.
func newS3Sink(ctx context.Context, o s3Options) (*sink, error) {
	bucket, prefix, err := parseS3URL(o.URL)
	if err != nil {
		return nil, err
	}
	region := o.Region
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	// The SDK's log lines ("falling back to IMDSv1") are not shown: its
	// errors say what failed. An S3-compatible server is never asked for
	// EC2 instance credentials.
	loads := []func(*config.LoadOptions) error{config.WithRegion(region), config.WithLogger(logging.Nop{})}
	custom := o.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	if custom {
		loads = append(loads, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if o.AccessKey != "" || o.SecretKey != "" {
		if o.AccessKey == "" || o.SecretKey == "" {
			return nil, errors.New("-s3-access-key and -s3-secret-key go together")
		}
		loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKey, o.SecretKey, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("AWS config: %w", err)
	}
	if custom {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			return nil, errors.New("no AWS credentials for the S3 endpoint: -s3-access-key and -s3-secret-key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (for scripts/versitygw.sh: eval \"$(scripts/versitygw.sh aws)\")")
		}
	}
	client := awss3.NewFromConfig(cfg, func(opts *awss3.Options) {
		if o.Endpoint != "" {
			opts.BaseEndpoint = aws.String(o.Endpoint)
		}
		opts.UsePathStyle = o.PathStyle
	})
	desc := "s3://" + bucket + "/" + prefix
	if o.Endpoint != "" {
		desc += " at " + o.Endpoint
	}
	return &sink{
		desc: desc,
		newWriter: func() dlqdump.Writer {
			return &s3.Writer{Client: client, Bucket: bucket, Prefix: prefix, SpoolDir: o.SpoolDir}
		},
		reader: &s3.Reader{Client: client, Bucket: bucket, Prefix: prefix},
	}, nil
}

// where describes what the sink holds: for the exit message.
func (s *sink) where(ctx context.Context) string {
	text, _ := s.whereCount(ctx)
	return text
}

// whereCount is where, and the number of ready segments.
func (s *sink) whereCount(ctx context.Context) (string, int) {
	var ready, quar int
	var names []string
	for si, err := range s.reader.List(ctx, dsink.AreaReady) {
		if err != nil {
			return fmt.Sprintf("%s (listing failed: %v)", s.desc, err), 0
		}
		ready++
		if len(names) < 5 {
			names = append(names, si.Name)
		}
	}
	for _, err := range s.reader.List(ctx, dsink.AreaQuarantine) {
		if err != nil {
			break
		}
		quar++
	}
	out := fmt.Sprintf("segments are in %s: %d ready to restore, %d quarantined", s.desc, ready, quar)
	if quar > 0 && s.dir != "" {
		out += " (in " + s.dir + "/" + fs.QuarantineDir + ")"
	}
	for _, n := range names {
		out += "\n  " + n
	}
	if ready > len(names) {
		out += fmt.Sprintf("\n  ... and %d more", ready-len(names))
	}
	return out, ready
}

// readyRecords counts the records ready to restore: what a dry run of a
// Restorer of the demo's version would deliver, once what a crashed run
// left unpublished is published (a Queue started and closed on the sink
// recovers it, as the scene's Queue would when it starts).
func (s *sink) readyRecords(ctx context.Context) (uint64, error) {
	q, err := dlqdump.NewQueue(&dlqdump.Config{Version: dumpVersion, Capacity: dlqdump.Megabyte, Writer: s.newWriter()})
	if err != nil {
		return 0, fmt.Errorf("recovering %s: %w", s.desc, err)
	}
	if err := q.Close(); err != nil {
		return 0, fmt.Errorf("recovering %s: %w", s.desc, err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Version: dumpVersion, Reader: s.reader, Decoder: decoder.Fallthrough{}, Queue: refuseAll{}})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	rep, err := r.Run(ctx, dlqdump.RunOptions{DryRun: true})
	if err != nil && !errors.Is(err, dlqdump.ErrNotFound) {
		return 0, fmt.Errorf("counting the records in %s: %w", s.desc, err)
	}
	return rep.Delivered, nil
}

// refuseAll is the destination of a dry run, which delivers nothing.
type refuseAll struct{}

func (refuseAll) Enqueue(any) error { return errors.New("demo: a dry run delivers nothing") }

// empty reports whether the sink holds no ready and no quarantined segment.
func (s *sink) empty(ctx context.Context) bool {
	for _, area := range []dsink.Area{dsink.AreaReady, dsink.AreaQuarantine, dsink.AreaArchive} {
		for _, err := range s.reader.List(ctx, area) {
			_ = err
			return false
		}
	}
	return true
}
