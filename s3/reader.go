package s3

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/sink"
)

// Defaults of the Reader's fields.
const (
	// DefaultReadChunk is the size of the ranged GETs reading a segment,
	// the size of the segment reader's read-ahead window.
	DefaultReadChunk = 256 * dlqdump.Kilobyte
	// DefaultReadAhead is how many chunks past the last read are fetched
	// in the background.
	DefaultReadAhead = 3
	// DefaultListPageSize is the number of keys asked for per
	// ListObjectsV2 page.
	DefaultListPageSize = 1000
	// DefaultListConcurrency is how many quarantine reasons List fetches
	// at once.
	DefaultListConcurrency = 8
)

// Reader is where a Restorer finds segments in an S3 bucket under Prefix. Use
// it as dlqdump.Config.Reader:
//
//	&s3.Reader{Client: client, Bucket: "dead-letters", Prefix: "orders/"}
//
// Areas are key prefixes: ready segments at Prefix+NAME, quarantined ones at
// Prefix+"quarantine/"+NAME (the reason in the metadata x-amz-meta-dlqdump-reason),
// archived ones at Prefix+"archive/"+NAME. A segment's record (its restore
// claim and progress, see sink.Records) is a small object at
// Prefix+".claims/"+NAME+".claim", created with If-None-Match: * and replaced
// with If-Match on its ETag, so it changes only by compare-and-swap; the
// bucket must support these conditional writes (AWS S3, versitygw and
// gofakes3 do). Deleting a record sends If-Match too; servers that ignore it
// on deletes (gofakes3 at this writing; versitygw 1.8 honours it) delete
// unconditionally, which dlqdump's claim protocol tolerates: it removes a
// record only after fencing it. No clock is compared across machines.
//
// Open returns a sink.File reading by ranged GETs of ReadChunk bytes and
// fetching the next ReadAhead chunks in the background, so reading a segment
// block by block is not bound by S3's latency; its memory is a few chunks.
//
// The fields are read when the Reader is first used and must not change
// afterwards. A Reader must not be copied after first use; it is safe for
// concurrent use.
type Reader struct {
	// Client is the S3 client (see Writer.Client). Required.
	Client *awss3.Client
	// Bucket is the bucket. Required.
	Bucket string
	// Prefix is put before every key, as in the Writer. Default "".
	Prefix string

	// ReadChunk is the size of the ranged GETs of an open segment. An open
	// segment holds at most ReadAhead+5 chunks (about 2 MiB by default)
	// besides reads of more than 4 chunks, which go straight into the
	// caller's buffer. Default DefaultReadChunk (256 KiB).
	ReadChunk dlqdump.MemorySize
	// ReadAhead is how many chunks after the last read are fetched in the
	// background. Negative: none. Default DefaultReadAhead (3).
	ReadAhead int
	// ListPageSize is the number of keys per ListObjectsV2 page, at most
	// 1000. Default DefaultListPageSize (1000).
	ListPageSize int
	// ListConcurrency is how many reasons List reads at once (quarantine
	// area). Default
	// DefaultListConcurrency (8).
	ListConcurrency int

	// MultipartThreshold, PartSize and PartConcurrency tune the uploads of
	// segments made by Create, as in the Writer.
	MultipartThreshold dlqdump.MemorySize
	PartSize           dlqdump.MemorySize
	PartConcurrency    int

	// Retry says how failed S3 calls are retried. Default: see Retry.
	Retry Retry
	// Logger receives warnings. Default: discard.
	Logger *slog.Logger

	mu sync.Mutex
	st *store
}

var (
	_ sink.Reader     = (*Reader)(nil)
	_ sink.NameLister = (*Reader)(nil)
	_ sink.Prober     = (*Reader)(nil)
	_ sink.NameSeeker = (*Reader)(nil)
	_ sink.Discarder  = (*Reader)(nil)
)

func (r *Reader) state() (*store, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st != nil {
		return r.st, nil
	}
	if err := checkConfig("Reader", r.Client, r.Bucket); err != nil {
		return nil, err
	}
	if r.ListPageSize > 1000 {
		return nil, fmt.Errorf("%w: s3.Reader.ListPageSize: %d is more than 1000", dlqdump.ErrConfig, r.ListPageSize)
	}
	st := &store{client: oneAttemptClient(r.Client), bucket: r.Bucket, prefix: r.Prefix, retry: r.Retry.withDefaults(),
		log: newLogger(r.Logger).With(slog.String("component", "dlqdump.s3.Reader"))}
	st.setUpload(int64(r.MultipartThreshold), int64(r.PartSize), r.PartConcurrency)
	r.st = st
	return st, nil
}

func (r *Reader) chunk() int64 {
	if r.ReadChunk <= 0 {
		return int64(DefaultReadChunk)
	}
	return int64(r.ReadChunk)
}

func (r *Reader) readAhead() int {
	switch {
	case r.ReadAhead < 0:
		return 0
	case r.ReadAhead == 0:
		return DefaultReadAhead
	}
	return r.ReadAhead
}

func (r *Reader) listConcurrency() int {
	if r.ListConcurrency <= 0 {
		return DefaultListConcurrency
	}
	return r.ListConcurrency
}

// List returns the segments of an area in name order, oldest first, page by
// page (ListObjectsV2 with Delimiter "/", so other areas and records are not
// listed). Quarantined segments carry their reason, read from each object's
// metadata (one HeadObject per quarantined segment, ListConcurrency at a
// time).
func (r *Reader) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		s, err := r.state()
		if err != nil {
			yield(sink.Info{}, err)
			return
		}
		prefix, err := s.areaPrefix(area)
		if err != nil {
			yield(sink.Info{}, err)
			return
		}
		var page []sink.Info
		flush := func() bool {
			if area != sink.AreaQuarantine {
				return yieldAll(page, yield, &page)
			}
			if err := r.reasons(ctx, s, page); err != nil {
				yield(sink.Info{}, err)
				return false
			}
			return yieldAll(page, yield, &page)
		}
		for obj, err := range s.listKeys(ctx, prefix, r.ListPageSize) {
			if err != nil {
				yield(sink.Info{}, err)
				return
			}
			if obj == nil { // end of a page
				if !flush() {
					return
				}
				continue
			}
			name := strings.TrimPrefix(aws.ToString(obj.Key), prefix)
			if checkName(name) != nil {
				continue
			}
			page = append(page, sink.Info{Name: name, Area: area, Size: aws.ToInt64(obj.Size), Modified: aws.ToTime(obj.LastModified)})
		}
	}
}

// yieldAll yields a page of infos and empties it.
func yieldAll(page []sink.Info, yield func(sink.Info, error) bool, keep *[]sink.Info) bool {
	for _, si := range page {
		if !yield(si, nil) {
			return false
		}
	}
	*keep = page[:0]
	return true
}

// listKeys lists the objects directly under prefix, page by page; a nil
// object ends each page.
func (s *store) listKeys(ctx context.Context, prefix string, pageSize int) iter.Seq2[*types.Object, error] {
	return s.listKeysAfter(ctx, prefix, "", pageSize)
}

// listKeysGrowing is listKeys asking for firstPage keys first, twice as
// many with every page after, up to pageSize: a caller that stops after a
// few keys (a poll of the due jobs) pays for a few, where a server's cost
// grows with the keys a page returns (versitygw: 35 ms for 1,000 keys of a
// 10,000-key prefix, 6 ms for 10).
func (s *store) listKeysGrowing(ctx context.Context, prefix string, firstPage, pageSize int) iter.Seq2[*types.Object, error] {
	return s.listPages(ctx, prefix, "", firstPage, pageSize)
}

// listKeysAfter is listKeys from the first key after prefix+after ("": from
// the start).
func (s *store) listKeysAfter(ctx context.Context, prefix, after string, pageSize int) iter.Seq2[*types.Object, error] {
	return s.listPages(ctx, prefix, after, pageSize, pageSize)
}

// listPages lists the objects directly under prefix after prefix+after, in
// pages of firstPage keys, doubling up to pageSize.
func (s *store) listPages(ctx context.Context, prefix, after string, firstPage, pageSize int) iter.Seq2[*types.Object, error] {
	if pageSize <= 0 {
		pageSize = DefaultListPageSize
	}
	if firstPage <= 0 || firstPage > pageSize {
		firstPage = pageSize
	}
	return func(yield func(*types.Object, error) bool) {
		in := &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, Delimiter: aws.String("/"), MaxKeys: aws.Int32(int32(firstPage))}
		if after != "" {
			in.StartAfter = aws.String(prefix + after)
		}
		for {
			var out *awss3.ListObjectsV2Output
			err := s.call(ctx, "ListObjectsV2", prefix, 0, true, func(ctx context.Context) error {
				var err error
				out, err = s.client.ListObjectsV2(ctx, in)
				return err
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range out.Contents {
				if !yield(&out.Contents[i], nil) {
					return
				}
			}
			if !yield(nil, nil) {
				return
			}
			if !aws.ToBool(out.IsTruncated) {
				return
			}
			in.MaxKeys = aws.Int32(min(2*aws.ToInt32(in.MaxKeys), int32(pageSize)))
			switch {
			case aws.ToString(out.NextContinuationToken) != "":
				in.ContinuationToken = out.NextContinuationToken
			case len(out.Contents) > 0:
				in.ContinuationToken = nil
				in.StartAfter = out.Contents[len(out.Contents)-1].Key
			default:
				yield(nil, s.opErr("ListObjectsV2", prefix, errors.New("truncated page without a continuation token")))
				return
			}
		}
	}
}

// reasons adds the reasons to a page of quarantined segments, reading up to
// ListConcurrency objects' metadata at once.
func (r *Reader) reasons(ctx context.Context, s *store, page []sink.Info) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(r.listConcurrency(), len(page)) {
		wg.Go(func() {
			for i := range next {
				var err error
				page[i].Reason, err = r.reason(ctx, s, page[i].Name)
				if notFound(err) {
					err = nil // moved or deleted meanwhile
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range page {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// reason returns the reason of a quarantined segment, from its metadata.
// (It is not cached: a segment moved out of quarantine and back holds the
// same bytes, so the same ETag, with another reason.)
func (r *Reader) reason(ctx context.Context, s *store, name string) (string, error) {
	out, err := s.head(ctx, s.prefix+QuarantinePrefix+name)
	if err != nil {
		return "", err
	}
	return decodeReason(out.Metadata[MetaReason]), nil
}

func (s *store) head(ctx context.Context, key string) (*awss3.HeadObjectOutput, error) {
	var out *awss3.HeadObjectOutput
	err := s.call(ctx, "HeadObject", key, 0, true, func(ctx context.Context) error {
		var err error
		out, err = s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
		return err
	})
	return out, err
}

// headSegment returns a segment's metadata, or an error wrapping
// sink.ErrNotFound.
func (s *store) headSegment(ctx context.Context, area sink.Area, name string) (string, *awss3.HeadObjectOutput, error) {
	key, err := s.key(area, name)
	if err != nil {
		return "", nil, err
	}
	out, err := s.head(ctx, key)
	if notFound(err) {
		return key, nil, fmt.Errorf("%w: %s segment %s: %w", sink.ErrNotFound, area, name, err)
	}
	return key, out, err
}

// Open opens a segment for reading without claiming it. Its reads stop when
// ctx is done. A missing segment is an error wrapping sink.ErrNotFound. The
// request that finds the segment reads its first ReadChunk bytes: a segment
// that small is read in that one GET.
func (r *Reader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	s, err := r.state()
	if err != nil {
		return nil, err
	}
	key, err := s.key(area, name)
	if err != nil {
		return nil, err
	}
	o, err := openObject(ctx, s, key, r.chunk(), r.readAhead())
	if notFound(err) {
		return nil, fmt.Errorf("%w: %s segment %s: %w", sink.ErrNotFound, area, name, err)
	}
	if err != nil {
		return nil, err // not a nil *object in a non-nil sink.File
	}
	return o, nil
}

// Exists reports whether a segment is in area: one HeadObject. It implements
// sink.Prober.
func (r *Reader) Exists(ctx context.Context, area sink.Area, name string) (bool, error) {
	s, err := r.state()
	if err != nil {
		return false, err
	}
	_, _, err = s.headSegment(ctx, area, name)
	if errors.Is(err, sink.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Create starts a new segment in an area. Its bytes are kept in memory and
// uploaded at Commit, conditionally (If-None-Match: *), before Commit
// returns. Sync is not supported.
func (r *Reader) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	s, err := r.state()
	if err != nil {
		return nil, err
	}
	key, err := s.key(area, name)
	if err != nil {
		return nil, err
	}
	return &memSegment{name: name, sync: errCreateSync, commit: func(ctx context.Context, data []byte) error {
		u := &upload{key: key, body: bytesReaderAt(data), size: int64(len(data))}
		u.crc, _ = checksum(u.body, u.size)
		return s.put(ctx, u, true)
	}}, nil
}

var errCreateSync = fmt.Errorf("%w: segments made by s3.Reader.Create are stored at Commit", errors.ErrUnsupported)

func (s *store) deleteKey(ctx context.Context, key string) error {
	return s.call(ctx, "DeleteObject", key, 0, true, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
		if notFound(err) {
			return nil
		}
		return err
	})
}

// Delete removes a segment. A missing segment is an error wrapping
// sink.ErrNotFound.
func (r *Reader) Delete(ctx context.Context, area sink.Area, name string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	key, _, err := s.headSegment(ctx, area, name)
	if err != nil {
		return err
	}
	return s.deleteKey(ctx, key)
}

// Discard removes segments, whether or not they are there: a DeleteObject
// for one, a DeleteObjects per 1000 for more (Delete asks first whether
// the segment is there, to say ErrNotFound). It implements sink.Discarder.
func (r *Reader) Discard(ctx context.Context, area sink.Area, names ...string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(names))
	for _, name := range names {
		key, err := s.key(area, name)
		if err != nil {
			return err
		}
		keys = append(keys, key)
	}
	if len(keys) == 1 {
		return s.deleteKey(ctx, keys[0])
	}
	return s.deleteKeys(ctx, keys)
}

// Names lists the names of an area's segments, oldest first, without
// reading their reasons: one ListObjectsV2 request per page. It implements
// sink.NameLister.
func (r *Reader) Names(ctx context.Context, area sink.Area) iter.Seq2[string, error] {
	return r.NamesAfter(ctx, area, "")
}

// NamesAfter lists the names of an area's segments that sort after after,
// oldest first, as Names does: a caller that stops after a page costs one
// request, whatever the size of the area. It implements sink.NameSeeker.
func (r *Reader) NamesAfter(ctx context.Context, area sink.Area, after string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		s, err := r.state()
		if err != nil {
			yield("", err)
			return
		}
		prefix, err := s.areaPrefix(area)
		if err != nil {
			yield("", err)
			return
		}
		for obj, err := range s.listKeysAfter(ctx, prefix, after, r.ListPageSize) {
			if err != nil {
				yield("", err)
				return
			}
			if obj == nil {
				continue
			}
			if name := strings.TrimPrefix(aws.ToString(obj.Key), prefix); checkName(name) == nil {
				if !yield(name, nil) {
					return
				}
			}
		}
	}
}

// maxDeleteKeys is the most keys one DeleteObjects removes.
const maxDeleteKeys = 1000

// deleteKeys removes keys, maxDeleteKeys per DeleteObjects; a key that is
// not there is not an error.
func (s *store) deleteKeys(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		batch := keys[:min(len(keys), maxDeleteKeys)]
		keys = keys[len(batch):]
		objs := make([]types.ObjectIdentifier, len(batch))
		for i := range batch {
			objs[i] = types.ObjectIdentifier{Key: &batch[i]}
		}
		var out *awss3.DeleteObjectsOutput
		err := s.call(ctx, "DeleteObjects", batch[0], 0, true, func(ctx context.Context) error {
			var err error
			out, err = s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &s.bucket,
				Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}})
			return err
		})
		if err != nil {
			return err
		}
		var errs []error
		for _, e := range out.Errors {
			if code := aws.ToString(e.Code); code != "NoSuchKey" {
				errs = append(errs, s.opErr("DeleteObjects", aws.ToString(e.Key), fmt.Errorf("%s: %s", code, aws.ToString(e.Message))))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
