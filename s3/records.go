package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/sink"
)

// space is where a store of records keeps them: the segments' claim
// records (Prefix + ClaimsPrefix + NAME + ClaimSuffix), or a table's
// (Prefix + TablesPrefix + TABLE/ + KEY).
type space struct {
	sub    string             // after Prefix
	suffix string             // after the name
	check  func(string) error // the names it holds
}

var claimsSpace = space{sub: ClaimsPrefix, suffix: ClaimSuffix, check: checkName}

func (sp space) key(s *store, name string) (string, error) {
	if err := sp.check(name); err != nil {
		return "", err
	}
	return s.prefix + sp.sub + name + sp.suffix, nil
}

// ReadRecord returns the record of name and its ETag.
func (r *Reader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	return r.readRecord(ctx, claimsSpace, name)
}

// WriteRecord stores data as the record of name if its ETag is ifVersion
// (If-Match), or, with ifVersion "", if there is none (If-None-Match: *).
func (r *Reader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	return r.writeRecord(ctx, claimsSpace, name, data, ifVersion)
}

// DeleteRecord removes the record of name, sending If-Match: ifVersion (see
// the Reader's documentation for servers that ignore it).
func (r *Reader) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	return r.deleteRecord(ctx, claimsSpace, name, ifVersion)
}

// RecordNames lists the names with a record, sorted.
func (r *Reader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return r.recordNames(ctx, claimsSpace)
}

func (r *Reader) readRecord(ctx context.Context, sp space, name string) ([]byte, string, error) {
	s, err := r.state()
	if err != nil {
		return nil, "", err
	}
	key, err := sp.key(s, name)
	if err != nil {
		return nil, "", err
	}
	var (
		data []byte
		etag string
	)
	err = s.call(ctx, "GetObject", key, 0, true, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(io.LimitReader(out.Body, sink.MaxRecordSize+1))
		if err != nil {
			return err
		}
		data, etag = b, aws.ToString(out.ETag)
		return nil
	})
	if notFound(err) {
		return nil, "", fmt.Errorf("%w: record of %s: %w", sink.ErrNotFound, name, err)
	}
	if err != nil {
		return nil, "", err
	}
	if len(data) > sink.MaxRecordSize {
		return nil, "", s.opErr("GetObject", key, fmt.Errorf("record larger than %d bytes", sink.MaxRecordSize))
	}
	return data, etag, nil
}

func (r *Reader) writeRecord(ctx context.Context, sp space, name string, data []byte, ifVersion string) (string, error) {
	s, err := r.state()
	if err != nil {
		return "", err
	}
	key, err := sp.key(s, name)
	if err != nil {
		return "", err
	}
	if len(data) == 0 || len(data) > sink.MaxRecordSize {
		return "", fmt.Errorf("dlqdump: s3: record of %s: %d bytes (want 1 to %d)", name, len(data), sink.MaxRecordSize)
	}
	var etag string
	err = s.call(ctx, "PutObject", key, 0, true, func(ctx context.Context) error {
		in := &awss3.PutObjectInput{
			Bucket:        &s.bucket,
			Key:           &key,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			ContentType:   aws.String("application/json"),
		}
		if ifVersion == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(ifVersion)
		}
		out, err := s.client.PutObject(ctx, in)
		if err == nil {
			etag = aws.ToString(out.ETag)
		}
		return err
	})
	if preconditionFailed(err) || ifVersion != "" && notFound(err) {
		return "", fmt.Errorf("%w: record of %s: %w", sink.ErrConflict, name, err)
	}
	return etag, err
}

func (r *Reader) deleteRecord(ctx context.Context, sp space, name, ifVersion string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	key, err := sp.key(s, name)
	if err != nil {
		return err
	}
	if _, err := s.head(ctx, key); err != nil {
		if notFound(err) {
			return fmt.Errorf("%w: record of %s: %w", sink.ErrNotFound, name, err)
		}
		return err
	}
	err = s.call(ctx, "DeleteObject", key, 0, true, func(ctx context.Context) error {
		in := &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}
		if ifVersion != "" {
			in.IfMatch = aws.String(ifVersion)
		}
		_, err := s.client.DeleteObject(ctx, in)
		if notFound(err) {
			return nil
		}
		return err
	})
	if preconditionFailed(err) {
		return fmt.Errorf("%w: record of %s: %w", sink.ErrConflict, name, err)
	}
	return err
}

// firstRecordPage is how many keys the first page of a listing of records
// asks for, at least; each page after asks for twice as many, up to
// ListPageSize.
const firstRecordPage = 32

// recordNames lists the names of a space lazily, a page at a time: a
// caller that stops early reads no further page, and one that stops after
// a few keys (a poll of the due jobs) reads a small page.
func (r *Reader) recordNames(ctx context.Context, sp space) iter.Seq2[string, error] {
	return r.recordNamesFrom(ctx, sp, firstRecordPage)
}

// recordNamesFrom is recordNames whose first page asks for first keys.
func (r *Reader) recordNamesFrom(ctx context.Context, sp space, first int) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for nv, err := range r.recordVersionsFrom(ctx, sp, first) {
			if !yield(nv.Name, err) || err != nil {
				return
			}
		}
	}
}

// recordVersions lists the records of sp with their versions, the ETags
// the listing gives.
func (r *Reader) recordVersions(ctx context.Context, sp space) iter.Seq2[sink.NameVersion, error] {
	return r.recordVersionsFrom(ctx, sp, firstRecordPage)
}

// recordVersionsFrom is recordVersions whose first page asks for first
// keys.
func (r *Reader) recordVersionsFrom(ctx context.Context, sp space, first int) iter.Seq2[sink.NameVersion, error] {
	return func(yield func(sink.NameVersion, error) bool) {
		s, err := r.state()
		if err != nil {
			yield(sink.NameVersion{}, err)
			return
		}
		prefix := s.prefix + sp.sub
		for obj, err := range s.listKeysGrowing(ctx, prefix, first, r.ListPageSize) {
			if err != nil {
				yield(sink.NameVersion{}, err)
				return
			}
			if obj == nil {
				continue
			}
			name, ok := strings.CutSuffix(strings.TrimPrefix(aws.ToString(obj.Key), prefix), sp.suffix)
			if !ok || sp.check(name) != nil {
				continue
			}
			if !yield(sink.NameVersion{Name: name, Version: aws.ToString(obj.ETag)}, nil) {
				return
			}
		}
	}
}

// TablesPrefix holds the tables of records (sink.Tables): Prefix +
// TablesPrefix + TABLE + "/" + KEY.
const TablesPrefix = ".tables/"

// Table returns a table of records (sink.Tables), kept under Prefix +
// TablesPrefix + name + "/", changed by conditional writes as the claim
// records are.
func (r *Reader) Table(name string) (sink.Records, error) {
	if err := sink.CheckTableName(name); err != nil {
		return nil, err
	}
	return &table{r: r, sp: space{sub: TablesPrefix + name + "/", check: sink.CheckKey}}, nil
}

type table struct {
	r  *Reader
	sp space
	// read is how many keys the last listing of the table that stopped
	// early read (RecordNames): the next one asks for a few more in its
	// first page, so that a caller who reads about as many each time (a
	// runner's poll of its due jobs) makes one request, where pages
	// growing from firstRecordPage made several (a request per page
	// costs an S3 server about what reading its whole prefix does: a
	// versitygw lists a directory).
	read atomic.Int64
}

func (t *table) ReadRecord(ctx context.Context, key string) ([]byte, string, error) {
	return t.r.readRecord(ctx, t.sp, key)
}

func (t *table) WriteRecord(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	return t.r.writeRecord(ctx, t.sp, key, data, ifVersion)
}

func (t *table) DeleteRecord(ctx context.Context, key, ifVersion string) error {
	return t.r.deleteRecord(ctx, t.sp, key, ifVersion)
}

func (t *table) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	first := firstRecordPage
	if n := int(t.read.Load()); n > 0 {
		first = max(first, n+n/4+8)
	}
	return func(yield func(string, error) bool) {
		n := 0
		for name, err := range t.r.recordNamesFrom(ctx, t.sp, first) {
			if err != nil {
				yield(name, err)
				return
			}
			n++
			if !yield(name, nil) {
				t.read.Store(int64(n)) // stopped early: about as many next time
				return
			}
		}
		t.read.Store(0) // read whole: the pages grow from the smallest
	}
}

// RecordVersions lists the table's keys with their ETags, in the requests
// RecordNames makes (sink.VersionLister).
func (t *table) RecordVersions(ctx context.Context) iter.Seq2[sink.NameVersion, error] {
	return t.r.recordVersions(ctx, t.sp)
}

// DropRecord removes the record of key whatever its version, in one
// request (sink.RecordDropper).
func (t *table) DropRecord(ctx context.Context, key string) error {
	s, err := t.r.state()
	if err != nil {
		return err
	}
	k, err := t.sp.key(s, key)
	if err != nil {
		return err
	}
	return s.call(ctx, "DeleteObject", k, 0, true, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &k})
		if notFound(err) {
			return nil
		}
		return err
	})
}
