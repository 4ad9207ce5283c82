package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/sink"
)

// s3Flags are the flags that override the AWS environment.
type s3Flags struct {
	endpoint  string
	region    string
	pathStyle bool
	flags     *pflag.FlagSet
}

func (f *s3Flags) register(fl *pflag.FlagSet) {
	f.flags = fl
	fl.StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint URL, e.g. http://127.0.0.1:7070 (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)")
	fl.StringVar(&f.region, "s3-region", "", "S3 region (default: AWS_REGION, else us-east-1)")
	fl.BoolVar(&f.pathStyle, "s3-path-style", false, "path-style S3 addressing (default: on when an endpoint is set)")
}

// location is where a dump is: a directory or an S3 prefix.
type location struct {
	raw    string // as given
	dir    string // fs
	bucket string // s3
	prefix string // s3, "" or ending in "/"
	reader dlqdump.Reader
}

func (l *location) isS3() bool { return l.bucket != "" }

// String returns the location as the user would write it.
func (l *location) String() string {
	if l.isS3() {
		return "s3://" + l.bucket + "/" + l.prefix
	}
	return l.dir
}

// id names the location the same way from any working directory: an
// absolute directory, or s3://BUCKET/PREFIX.
func (l *location) id() string {
	if l.isS3() {
		return l.String()
	}
	if abs, err := filepath.Abs(l.dir); err == nil {
		return abs
	}
	return l.dir
}

// segPath names a segment of the location in messages.
func (l *location) segPath(area sink.Area, name string) string {
	sub := ""
	switch area {
	case sink.AreaQuarantine:
		sub = "quarantine/"
	case sink.AreaArchive:
		sub = "archive/"
	case sink.AreaStaging:
		sub = ".staging/"
	}
	if l.isS3() {
		return "s3://" + l.bucket + "/" + l.prefix + sub + name
	}
	return filepath.Join(l.dir, sub, name)
}

// parseLocation parses DIR or s3://BUCKET/PREFIX without opening it.
func parseLocation(s string) (*location, error) {
	if s == "" {
		return nil, usageErrorf("empty location")
	}
	if rest, ok := strings.CutPrefix(s, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return nil, usageErrorf("location %q: no bucket (want s3://BUCKET/PREFIX)", s)
		}
		prefix = strings.TrimLeft(prefix, "/")
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		return &location{raw: s, bucket: bucket, prefix: prefix}, nil
	}
	if strings.Contains(s, "://") {
		return nil, usageErrorf("location %q: unknown scheme (want a directory or s3://BUCKET/PREFIX)", s)
	}
	return &location{raw: s, dir: filepath.Clean(s)}, nil
}

// open parses a location and makes its Reader. mustExist: a directory that
// does not exist is an error (commands that read); otherwise it is created
// on first write.
func (a *app) open(s string, mustExist bool) (*location, error) {
	l, err := parseLocation(s)
	if err != nil {
		return nil, err
	}
	if !l.isS3() {
		if mustExist {
			st, err := os.Stat(l.dir)
			if err != nil {
				return nil, fmt.Errorf("location %s: %w", l.dir, err)
			}
			if !st.IsDir() {
				return nil, fmt.Errorf("location %s: not a directory", l.dir)
			}
		}
		l.reader = wrapReader(&fs.Reader{Directory: l.dir})
		return l, nil
	}
	client, err := a.s3Client(a.ctx)
	if err != nil {
		return nil, err
	}
	l.reader = wrapReader(&s3.Reader{Client: client, Bucket: l.bucket, Prefix: l.prefix})
	return l, nil
}

// s3Client builds an S3 client from the AWS environment and the flags.
//
// The SDK's own log lines (such as "falling back to IMDSv1") are not printed:
// its errors say what failed. With an endpoint given (an S3-compatible
// server), the EC2 instance metadata service is not asked for credentials,
// and missing credentials are said plainly before any request.
func (a *app) s3Client(ctx context.Context) (*awss3.Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(logging.Nop{})}
	if a.s3.region != "" {
		opts = append(opts, config.WithRegion(a.s3.region))
	}
	custom := a.s3.endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	if custom {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("S3 configuration: %w", err)
	}
	if custom {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			return nil, fmt.Errorf("no AWS credentials for the S3 endpoint: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE); for a server of scripts/versitygw.sh: eval \"$(scripts/versitygw.sh aws)\"")
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	endpoint := a.s3.endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if endpoint == "" && cfg.BaseEndpoint != nil {
		endpoint = *cfg.BaseEndpoint
	}
	if endpoint != "" && !strings.Contains(endpoint, "://") {
		return nil, usageErrorf("S3 endpoint %q: want a URL such as http://127.0.0.1:7070", endpoint)
	}
	pathStyle := endpoint != ""
	if f := a.s3.flags.Lookup("s3-path-style"); f != nil && f.Changed {
		pathStyle = a.s3.pathStyle
	}
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
	}), nil
}

// allAreas lists the areas in display order.
var allAreas = []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive}

// parseAreas parses the --area flag: ready, quarantine, archive or all.
func parseAreas(s string) ([]sink.Area, error) {
	if s == "all" {
		return allAreas, nil
	}
	ar, err := sink.ParseArea(s)
	if err != nil {
		return nil, usageErrorf("--area %q: want ready, quarantine, archive or all", s)
	}
	return []sink.Area{ar}, nil
}

// list returns the segments of the areas, oldest first within each area.
// With names, only those segments, searched in the areas; a name found in
// none is an error.
func (a *app) list(l *location, areas []sink.Area, names []string) ([]sink.Info, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string]bool{}
	var out []sink.Info
	for _, ar := range areas {
		for si, err := range l.reader.List(a.ctx, ar) {
			if err != nil {
				return nil, fmt.Errorf("list %s segments of %s: %w", ar, l, err)
			}
			if len(names) > 0 && !want[si.Name] {
				continue
			}
			found[si.Name] = true
			out = append(out, si)
		}
	}
	var missing []string
	for _, n := range names {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		where := make([]string, len(areas))
		for i, ar := range areas {
			where[i] = ar.String()
		}
		return out, fmt.Errorf("%w: %s not in %s (%s)", dlqdump.ErrNotFound, strings.Join(missing, ", "), l, strings.Join(where, ", "))
	}
	return out, nil
}

// areasFlag returns the areas to look in: the --area flag when given, else
// every area when segment names are given (they are looked for), else def.
func areasFlag(fl *pflag.FlagSet, value string, names []string, def string) ([]sink.Area, error) {
	if f := fl.Lookup("area"); f != nil && !f.Changed {
		if len(names) > 0 {
			return allAreas, nil
		}
		value = def
	}
	return parseAreas(value)
}

// isNotFound reports whether err says a segment is missing.
func isNotFound(err error) bool { return errors.Is(err, dlqdump.ErrNotFound) }

// overlaps reports whether the locations l and o share storage, so that
// writing into one changes the other: the same directory or one inside
// the other, or the same bucket with one prefix starting with the other
// (an area of a location lies inside it: DIR/quarantine,
// s3://B/P/quarantine/). Directories are compared as cleaned absolute
// paths with symbolic links resolved, and by identity (os.SameFile) of
// every existing directory on the way up, which also catches bind mounts
// and other names of the same directory. A directory that does not exist
// yet is compared through its nearest existing parent. why says how o
// relates to l: "is the same directory as", "is inside", "contains".
func (l *location) overlaps(o *location) (why string, overlap bool, err error) {
	switch {
	case l.isS3() != o.isS3():
		return "", false, nil
	case l.isS3():
		if l.bucket != o.bucket {
			return "", false, nil
		}
		switch {
		case l.prefix == o.prefix:
			return "is the same prefix as", true, nil
		case strings.HasPrefix(o.prefix, l.prefix):
			return "is inside", true, nil
		case strings.HasPrefix(l.prefix, o.prefix):
			return "contains", true, nil
		}
		return "", false, nil
	}
	lp, err := realPath(l.dir)
	if err != nil {
		return "", false, err
	}
	op, err := realPath(o.dir)
	if err != nil {
		return "", false, err
	}
	switch {
	case lp == op:
		return "is the same directory as", true, nil
	case pathWithin(op, lp):
		return "is inside", true, nil
	case pathWithin(lp, op):
		return "contains", true, nil
	}
	// Other names of the same directories (bind mounts, hard-linked or
	// renamed parents): compare each existing directory up the way.
	lst, lerr := os.Stat(l.dir)
	ost, oerr := os.Stat(o.dir)
	if lerr == nil && oerr == nil && os.SameFile(lst, ost) {
		return "is the same directory as", true, nil
	}
	if lerr == nil && dirWithin(op, lst) {
		return "is inside", true, nil
	}
	if oerr == nil && dirWithin(lp, ost) {
		return "contains", true, nil
	}
	return "", false, nil
}

// realPath returns the absolute, cleaned path of p with symbolic links
// resolved in its longest existing part (the rest does not exist yet).
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("location %s: %w", p, err)
	}
	var rest []string
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// pathWithin reports whether the cleaned absolute path p lies strictly
// inside dir.
func pathWithin(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// dirWithin reports whether one of the existing strict parents of the
// absolute path p is the directory described by dir.
func dirWithin(p string, dir os.FileInfo) bool {
	for cur := filepath.Dir(p); ; cur = filepath.Dir(cur) {
		if st, err := os.Stat(cur); err == nil && os.SameFile(st, dir) {
			return true
		}
		if filepath.Dir(cur) == cur {
			return false
		}
	}
}
