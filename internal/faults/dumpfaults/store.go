package dumpfaults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/faults"
	dlqs3 "github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
)

// Store is where one run dumps: a directory (the fs.Writer's, or the S3
// spool) and, for S3, a prefix in the bucket of a server. It is passed to a
// child process as JSON.
type Store struct {
	// Dir is the fs.Writer's directory or the s3.Writer's SpoolDir.
	Dir string `json:"dir"`
	// Server is the S3 server; nil for fs.
	Server *s3test.Server `json:"server,omitempty"`
	// Prefix is the run's key prefix in Server's bucket.
	Prefix string `json:"prefix,omitempty"`
}

// s3Retry keeps S3 retries quick: a single fault costs milliseconds.
var s3Retry = dlqs3.Retry{MaxAttempts: 10, BaseDelay: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond, AttemptTimeout: time.Minute}

// writer returns the scenario's Writer for the store, wrapped by in (its
// sink calls and, for S3, its HTTP requests) unless in is nil.
func (st *Store) writer(sc Scenario, in *faults.Injector, log *slog.Logger) dlqdump.Writer {
	var w dlqdump.Writer
	switch sc.Sink {
	case FS:
		w = &fs.Writer{Directory: st.Dir, Logger: log}
	default:
		// AbortUploadsAfter -1: the restart after a crash aborts the
		// crashed process's multipart uploads however recent, so the
		// enumeration checks that mechanism (the default waits an hour).
		sw := &dlqs3.Writer{Client: st.client(in), Bucket: st.Server.Bucket, Prefix: st.Prefix, Retry: s3Retry, Logger: log,
			SpoolWait: time.Minute, AbortUploadsAfter: -1}
		if sc.Sink == S3SpoolDir {
			sw.SpoolDir = st.Dir
		}
		if sc.Multipart {
			sw.MultipartThreshold = 1
		}
		w = sw
	}
	if in == nil {
		return w
	}
	return faults.WrapWriter(w, in)
}

// client returns a client of the store's server whose requests go through
// in, unless in is nil.
func (st *Store) client(in *faults.Injector) *awss3.Client {
	if in == nil {
		return st.Server.Client()
	}
	return st.Server.Client(func(o *awss3.Options) {
		o.HTTPClient = &faults.HTTPClient{Inner: o.HTTPClient, Injector: in}
	})
}

// contents is what a store holds: how many times each record of the
// scenario is stored, and what is wrong with it.
type contents struct {
	counts   map[int]int
	segments int
	problems []string // unreadable segments, foreign records, quarantined files
}

// contents reads every published segment of the store.
func (st *Store) contents(ctx context.Context, sc Scenario) (*contents, error) {
	c := &contents{counts: map[int]int{}}
	if sc.Sink == FS {
		paths, err := filepath.Glob(filepath.Join(st.Dir, "*"+segment.Ext))
		if err != nil {
			return nil, err
		}
		sort.Strings(paths)
		for _, p := range paths {
			if strings.HasPrefix(filepath.Base(p), ".") {
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			c.add(sc, filepath.Base(p), b)
		}
		c.quarantined(st.Dir)
		return c, nil
	}
	cl := st.client(nil)
	p := awss3.NewListObjectsV2Paginator(cl, &awss3.ListObjectsV2Input{Bucket: &st.Server.Bucket, Prefix: &st.Prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", st.Server.Bucket, st.Prefix, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			name := strings.TrimPrefix(key, st.Prefix)
			if strings.Contains(name, "/") || !strings.HasSuffix(name, segment.Ext) {
				c.problems = append(c.problems, "unexpected object "+name)
				continue
			}
			out, err := cl.GetObject(ctx, &awss3.GetObjectInput{Bucket: &st.Server.Bucket, Key: &key})
			if err != nil {
				return nil, fmt.Errorf("get %s: %w", key, err)
			}
			b, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("get %s: %w", key, err)
			}
			c.add(sc, name, b)
		}
	}
	if sc.Sink == S3SpoolDir {
		c.quarantined(st.Dir)
	}
	return c, nil
}

// add counts the records of a stored segment.
func (c *contents) add(sc Scenario, name string, b []byte) {
	c.segments++
	r, err := segment.NewReader(bytes.NewReader(b), int64(len(b)), &segment.ReaderOptions{Name: name})
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("segment %s unreadable: %v", name, err))
		return
	}
	if !r.Sealed() {
		c.problems = append(c.problems, fmt.Sprintf("segment %s is not sealed: %v", name, r.FooterError()))
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			c.problems = append(c.problems, fmt.Sprintf("segment %s damaged: %v", name, err))
			return
		}
		i := recordIndex(string(rec.Payload), sc.Records)
		if i < 0 {
			c.problems = append(c.problems, fmt.Sprintf("segment %s holds a record the scenario did not dump: %.40q", name, rec.Payload))
			continue
		}
		c.counts[i]++
	}
}

// quarantined reports the segments Recover moved aside in dir.
func (c *contents) quarantined(dir string) {
	entries, _ := os.ReadDir(filepath.Join(dir, fs.QuarantineDir))
	for _, e := range entries {
		c.problems = append(c.problems, "quarantined by recovery: "+e.Name())
	}
}

// leftovers lists what a finished dump must not leave: temporary files in
// the directory (fs: anything but published segments; S3 spool: anything at
// all) and unfinished multipart uploads under the prefix.
func (st *Store) leftovers(ctx context.Context, sc Scenario) ([]string, error) {
	var out []string
	entries, err := os.ReadDir(st.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		switch {
		case e.IsDir():
			continue // quarantine: reported by contents
		case sc.Sink == FS && !strings.HasPrefix(n, ".") && strings.HasSuffix(n, segment.Ext):
			continue // published
		case sc.Sink == FS:
			out = append(out, "temporary file "+n)
		default:
			out = append(out, "spool file "+n)
		}
	}
	if !sc.Sink.IsS3() {
		return out, nil
	}
	cl := st.client(nil)
	var keyMarker, idMarker *string
	for {
		page, err := cl.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &st.Server.Bucket, Prefix: &st.Prefix,
			KeyMarker: keyMarker, UploadIdMarker: idMarker})
		if apiCode(err) == "NoSuchUpload" {
			return out, nil // gofakes3: no upload ever made in the bucket
		}
		if err != nil {
			return nil, fmt.Errorf("list multipart uploads under s3://%s/%s: %w", st.Server.Bucket, st.Prefix, err)
		}
		for _, u := range page.Uploads {
			out = append(out, "unfinished multipart upload of "+strings.TrimPrefix(aws.ToString(u.Key), st.Prefix))
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		keyMarker, idMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// apiCode returns the S3 error code of err, "" if none.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
