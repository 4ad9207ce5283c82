package s3

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump"
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
	// DefaultListConcurrency is how many claims or quarantine reasons List
	// fetches at once.
	DefaultListConcurrency = 8
)

// Reader is where a Restorer finds segments in an S3 bucket under Prefix. Use
// it as dlqdump.Config.Reader:
//
//	&s3.Reader{Client: client, Bucket: "dead-letters", Prefix: "orders/"}
//
// Areas are key prefixes: ready segments at Prefix+NAME, quarantined ones at
// Prefix+"quarantine/"+NAME (the reason in the metadata x-amz-meta-dlqdump-reason),
// archived ones at Prefix+"archive/"+NAME. A claim is a small JSON object at
// Prefix+".claims/"+NAME+".claim" holding the owner, a token, the expiry and
// the checkpoint; it is created with If-None-Match: * and renewed, released
// or taken over with If-Match on its ETag, so two restorers never both hold a
// segment. The bucket must support conditional writes (AWS S3 and versitygw
// do). Lease expiry is judged by the restorers' clocks, which must agree to
// well within the lease.
//
// Open returns a SegmentFile reading by ranged GETs of ReadChunk bytes and
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
	// ListConcurrency is how many claims (ready area) or reasons
	// (quarantine area) List reads at once. Default
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

var _ dlqdump.Reader = (*Reader)(nil)

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
// page (ListObjectsV2 with Delimiter "/", so other areas and claims are not
// listed). Ready segments carry their claim, read from the claim objects;
// quarantined ones their reason, read from each object's metadata (one
// HeadObject per quarantined segment, ListConcurrency at a time).
func (r *Reader) List(ctx context.Context, area dlqdump.Area) iter.Seq2[dlqdump.SegmentInfo, error] {
	return func(yield func(dlqdump.SegmentInfo, error) bool) {
		s, err := r.state()
		if err != nil {
			yield(dlqdump.SegmentInfo{}, err)
			return
		}
		prefix, err := s.areaPrefix(area)
		if err != nil {
			yield(dlqdump.SegmentInfo{}, err)
			return
		}
		var claims map[string]bool
		if area == dlqdump.AreaReady {
			claims = map[string]bool{}
			for key, err := range s.listKeys(ctx, s.prefix+ClaimsPrefix, r.ListPageSize) {
				if err != nil {
					yield(dlqdump.SegmentInfo{}, err)
					return
				}
				if key == nil {
					continue
				}
				if name, ok := strings.CutSuffix(strings.TrimPrefix(aws.ToString(key.Key), s.prefix+ClaimsPrefix), ClaimSuffix); ok {
					claims[name] = true
				}
			}
		}
		var page []dlqdump.SegmentInfo
		flush := func() bool {
			if err := r.enrich(ctx, s, area, page, claims); err != nil {
				yield(dlqdump.SegmentInfo{}, err)
				return false
			}
			for _, si := range page {
				if !yield(si, nil) {
					return false
				}
			}
			page = page[:0]
			return true
		}
		for obj, err := range s.listKeys(ctx, prefix, r.ListPageSize) {
			if err != nil {
				yield(dlqdump.SegmentInfo{}, err)
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
			page = append(page, dlqdump.SegmentInfo{Name: name, Area: area, Size: aws.ToInt64(obj.Size), Modified: aws.ToTime(obj.LastModified)})
		}
	}
}

// listKeys lists the objects directly under prefix, page by page; a nil
// object ends each page.
func (s *store) listKeys(ctx context.Context, prefix string, pageSize int) iter.Seq2[*types.Object, error] {
	if pageSize <= 0 {
		pageSize = DefaultListPageSize
	}
	return func(yield func(*types.Object, error) bool) {
		in := &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, Delimiter: aws.String("/"), MaxKeys: aws.Int32(int32(pageSize))}
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

// enrich adds the claims or reasons to a page of infos, reading up to
// ListConcurrency objects at once.
func (r *Reader) enrich(ctx context.Context, s *store, area dlqdump.Area, page []dlqdump.SegmentInfo, claims map[string]bool) error {
	var todo []int
	for i, si := range page {
		switch {
		case area == dlqdump.AreaReady && claims[si.Name]:
			todo = append(todo, i)
		case area == dlqdump.AreaQuarantine:
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(r.listConcurrency(), len(todo)) {
		wg.Go(func() {
			for i := range next {
				var err error
				if area == dlqdump.AreaReady {
					var doc *claimDoc
					doc, _, _, err = s.getClaim(ctx, page[i].Name)
					if err == nil && doc != nil {
						page[i].Claim = doc.info()
					}
				} else {
					page[i].Reason, err = r.reason(ctx, s, page[i].Name)
					if notFound(err) {
						err = nil // moved or deleted meanwhile
					}
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
	for _, i := range todo {
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
// dlqdump.ErrNotFound.
func (s *store) headSegment(ctx context.Context, area dlqdump.Area, name string) (string, *awss3.HeadObjectOutput, error) {
	key, err := s.key(area, name)
	if err != nil {
		return "", nil, err
	}
	out, err := s.head(ctx, key)
	if notFound(err) {
		return key, nil, fmt.Errorf("%w: %s segment %s: %w", dlqdump.ErrNotFound, area, name, err)
	}
	return key, out, err
}

// Open opens a segment for reading without claiming it. Its reads stop when
// ctx is done. A missing segment is an error wrapping dlqdump.ErrNotFound.
func (r *Reader) Open(ctx context.Context, area dlqdump.Area, name string) (dlqdump.SegmentFile, error) {
	s, err := r.state()
	if err != nil {
		return nil, err
	}
	key, out, err := s.headSegment(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return newObject(ctx, s, key, aws.ToInt64(out.ContentLength), r.chunk(), r.readAhead()), nil
}

// Create starts a new segment in an area. Its bytes are kept in memory and
// uploaded at Commit, conditionally (If-None-Match: *), before Commit
// returns. Sync is not supported.
func (r *Reader) Create(ctx context.Context, area dlqdump.Area, name string) (dlqdump.SegmentWriter, error) {
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

// Move moves a segment to another area: a server-side copy (with the reason
// in the metadata when moved to quarantine, without it otherwise) and a
// delete. A ready segment is claimed for the move, so Move fails with an
// error wrapping dlqdump.ErrClaimed while a restorer holds it; its claim
// object, with any checkpoint, is removed. A missing segment is an error
// wrapping dlqdump.ErrNotFound.
func (r *Reader) Move(ctx context.Context, name string, from, to dlqdump.Area, reason string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("dlqdump: s3: move segment %s: from and to are both %s", name, from)
	}
	if _, err := s.areaPrefix(to); err != nil {
		return err
	}
	if from == dlqdump.AreaReady {
		c, err := r.claim(ctx, s, name, "dlqdump-s3-move-"+newToken()[:12], time.Minute)
		if err != nil {
			return err
		}
		if err := c.finish(ctx, to, reason); err != nil {
			if errors.Is(err, dlqdump.ErrLeaseLost) {
				return fmt.Errorf("%w: move segment %s: %w", dlqdump.ErrClaimed, name, err)
			}
			// Do not leave the segment claimed for a minute.
			if rerr := c.Release(context.WithoutCancel(ctx)); rerr != nil {
				err = errors.Join(err, rerr)
			}
			return err
		}
		return nil
	}
	return s.move(ctx, name, from, to, reason)
}

// move copies a segment to another area and deletes the original.
func (s *store) move(ctx context.Context, name string, from, to dlqdump.Area, reason string) error {
	src, out, err := s.headSegment(ctx, from, name)
	if err != nil {
		return err
	}
	dst, err := s.key(to, name)
	if err != nil {
		return err
	}
	meta := map[string]string{}
	if v := out.Metadata[MetaChecksum]; v != "" {
		meta[MetaChecksum] = v
	}
	if to == dlqdump.AreaQuarantine {
		// Set even when empty: some servers (gofakes3) merge the source's
		// metadata into a copy's despite REPLACE.
		meta[MetaReason] = encodeReason(reason)
	}
	if err := s.call(ctx, "CopyObject", dst, aws.ToInt64(out.ContentLength), true, func(ctx context.Context) error {
		_, err := s.client.CopyObject(ctx, &awss3.CopyObjectInput{
			Bucket:            &s.bucket,
			Key:               &dst,
			CopySource:        aws.String(copySource(s.bucket, src)),
			MetadataDirective: types.MetadataDirectiveReplace,
			ContentType:       aws.String("application/octet-stream"),
			Metadata:          meta,
		})
		return err
	}); err != nil {
		return err
	}
	return s.deleteKey(ctx, src)
}

func copySource(bucket, key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return url.PathEscape(bucket) + "/" + strings.Join(parts, "/")
}

func (s *store) deleteKey(ctx context.Context, key string) error {
	return s.call(ctx, "DeleteObject", key, 0, true, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
		if notFound(err) {
			return nil
		}
		return err
	})
}

// Delete removes a segment, and a ready segment's claim object. A missing
// segment is an error wrapping dlqdump.ErrNotFound.
func (r *Reader) Delete(ctx context.Context, area dlqdump.Area, name string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	key, _, err := s.headSegment(ctx, area, name)
	if err != nil {
		return err
	}
	if err := s.deleteKey(ctx, key); err != nil {
		return err
	}
	if area == dlqdump.AreaReady {
		return s.deleteKey(ctx, s.claimKey(name))
	}
	return nil
}

// getClaim reads the claim object of a segment, returning it parsed and as
// stored, and its ETag: nil if there is none.
func (s *store) getClaim(ctx context.Context, name string) (*claimDoc, string, []byte, error) {
	key := s.claimKey(name)
	var (
		doc  *claimDoc
		etag string
		raw  []byte
	)
	err := s.call(ctx, "GetObject", key, 0, true, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
		if err != nil {
			return err
		}
		d := new(claimDoc)
		if err := json.Unmarshal(b, d); err != nil {
			s.log.Warn("a claim object is not valid JSON; treating it as expired", slog.String("key", key), slog.Any("error", err))
			d = &claimDoc{}
		}
		doc, etag, raw = d, aws.ToString(out.ETag), b
		return nil
	})
	if notFound(err) {
		return nil, "", nil, nil
	}
	return doc, etag, raw, err
}
