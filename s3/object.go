package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/sink"
)

// object is an open segment read by ranged GETs of whole chunks. It keeps
// the chunks of the last reads, the least recently used ones dropped past
// maxSpan+ahead+1 of them, and fetches the ahead chunks after each read in
// the background. A read spanning more than maxSpan chunks goes straight into
// the caller's buffer, by parallel ranged GETs. So memory stays at a few
// chunks, and a segment.Reader (header, then footer, then blocks in order)
// fetches each chunk about once.
type object struct {
	s     *store
	key   string
	size  int64
	chunk int64
	ahead int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	chunks map[int64]*chunk
	clock  uint64 // stamps chunk uses
	closed bool
}

type chunk struct {
	done chan struct{}
	data []byte
	err  error
	used uint64 // last use, for eviction
}

const (
	maxSpan     = 4 // chunks a read may use from the cache
	directParts = 4 // parallel GETs of a large read
)

var _ sink.File = (*object)(nil)

// openObject opens the object at key with a GET of its first chunk, whose
// answer says the object's size too, and starts fetching its last chunk,
// where a segment's footer is. For a missing object notFound(err) is true.
func openObject(ctx context.Context, s *store, key string, chunkSize int64, ahead int) (*object, error) {
	rng := "bytes=0-" + strconv.FormatInt(chunkSize-1, 10)
	var (
		first []byte
		size  int64
	)
	err := s.call(ctx, "GetObject", key, chunkSize, true, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &rng})
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			first, size = nil, 0 // an empty object has no byte 0
			return nil
		}
		if err != nil {
			return err
		}
		defer out.Body.Close()
		total, ok := rangeTotal(aws.ToString(out.ContentRange))
		if !ok { // the whole object, the range ignored
			total = aws.ToInt64(out.ContentLength)
		}
		buf := make([]byte, min(chunkSize, total))
		if _, err := io.ReadFull(out.Body, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: range %s of %d bytes: %w", errShortBody, rng, total, err)
			}
			return err
		}
		first, size = buf, total
		return nil
	})
	if err != nil {
		return nil, err // notFound(err) for a missing object
	}
	o := newObject(ctx, s, key, size, chunkSize, ahead)
	if size > 0 {
		done := make(chan struct{})
		close(done)
		o.mu.Lock()
		o.chunks[0] = &chunk{done: done, data: first}
		if last := (size - 1) / chunkSize; last > 0 {
			o.startLocked(last)
		}
		o.mu.Unlock()
	}
	return o, nil
}

// rangeTotal returns the object's size from a Content-Range answer,
// "bytes FIRST-LAST/SIZE".
func rangeTotal(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 || !strings.HasPrefix(cr, "bytes ") {
		return 0, false
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return n, err == nil && n >= 0
}

func newObject(ctx context.Context, s *store, key string, size, chunkSize int64, ahead int) *object {
	o := &object{s: s, key: key, size: size, chunk: chunkSize, ahead: ahead, chunks: map[int64]*chunk{}}
	o.ctx, o.cancel = context.WithCancel(ctx)
	return o
}

// Size returns the segment's size.
func (o *object) Size() int64 { return o.size }

// Close stops the prefetches and drops the cache.
func (o *object) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	clear(o.chunks)
	o.mu.Unlock()
	return nil
}

// ReadAt reads len(p) bytes at off. It is safe for concurrent use.
func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("dlqdump: s3: read %s at negative offset %d", o.key, off)
	}
	if off >= o.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), o.size)
	n := int(end - off)
	if n == 0 {
		return 0, nil
	}
	first, last := off/o.chunk, (end-1)/o.chunk
	var err error
	if last-first+1 > maxSpan {
		err = o.readDirect(p[:n], off, last)
	} else {
		err = o.readCached(p[:n], off, first, last)
	}
	if err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readCached reads through the chunk cache.
func (o *object) readCached(p []byte, off, first, last int64) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return fmt.Errorf("dlqdump: s3: read %s: %w", o.key, os.ErrClosed)
	}
	o.clock++
	need := make([]*chunk, 0, last-first+1)
	for i := first; i <= last; i++ {
		c := o.startLocked(i)
		c.used = o.clock
		need = append(need, c)
	}
	o.prefetchLocked(first, last)
	o.mu.Unlock()

	for k, c := range need {
		i := first + int64(k)
		data, err := o.wait(i, c)
		if err != nil {
			return err
		}
		base := i * o.chunk
		lo := max(off, base)
		hi := min(off+int64(len(p)), base+int64(len(data)))
		if hi < lo || hi-base > int64(len(data)) {
			return fmt.Errorf("dlqdump: s3: read %s: chunk %d is %d bytes, short of the segment's size", o.key, i, len(data))
		}
		copy(p[lo-off:hi-off], data[lo-base:hi-base])
	}
	return nil
}

// readDirect reads a large range straight into p and prefetches after it.
func (o *object) readDirect(p []byte, off, last int64) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return fmt.Errorf("dlqdump: s3: read %s: %w", o.key, os.ErrClosed)
	}
	o.clock++
	o.prefetchLocked(last+1, last)
	o.mu.Unlock()
	part := max((int64(len(p))+directParts-1)/directParts, o.chunk)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for lo := int64(0); lo < int64(len(p)); lo += part {
		hi := min(lo+part, int64(len(p)))
		wg.Go(func() {
			if err := o.get(o.ctx, p[lo:hi], off+lo); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// wait returns chunk i's bytes. A prefetch that failed is tried once more in
// the foreground.
func (o *object) wait(i int64, c *chunk) ([]byte, error) {
	for try := 0; ; try++ {
		select {
		case <-c.done:
		case <-o.ctx.Done():
			return nil, fmt.Errorf("dlqdump: s3: read %s: %w", o.key, o.ctx.Err())
		}
		if c.err == nil {
			return c.data, nil
		}
		if try > 0 || o.ctx.Err() != nil || errors.Is(c.err, sink.ErrNotFound) {
			return nil, c.err
		}
		o.mu.Lock()
		if o.chunks[i] == c {
			delete(o.chunks, i)
		}
		if o.closed {
			o.mu.Unlock()
			return nil, fmt.Errorf("dlqdump: s3: read %s: %w", o.key, os.ErrClosed)
		}
		c = o.startLocked(i)
		o.mu.Unlock()
	}
}

// startLocked returns chunk i, starting its fetch if it is not cached.
func (o *object) startLocked(i int64) *chunk {
	if c, ok := o.chunks[i]; ok {
		return c
	}
	c := &chunk{done: make(chan struct{})}
	o.chunks[i] = c
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer close(c.done)
		lo := i * o.chunk
		buf := make([]byte, min(o.chunk, o.size-lo))
		if err := o.get(o.ctx, buf, lo); err != nil {
			c.err = err
			return
		}
		c.data = buf
	}()
	return c
}

// prefetchLocked starts fetching the ahead chunks after last and drops the
// least recently used chunks outside [first, last+ahead] past the cache's
// size.
func (o *object) prefetchLocked(first, last int64) {
	n := (o.size + o.chunk - 1) / o.chunk
	for i := last + 1; i <= last+int64(o.ahead) && i < n; i++ {
		o.startLocked(i).used = o.clock
	}
	for len(o.chunks) > maxSpan+o.ahead+1 {
		victim, oldest := int64(-1), uint64(0)
		for i, c := range o.chunks {
			if (i < first || i > last+int64(o.ahead)) && (victim < 0 || c.used < oldest) {
				victim, oldest = i, c.used
			}
		}
		if victim < 0 {
			return
		}
		delete(o.chunks, victim) // an unfinished fetch ends on its own
	}
}

// get fills p with the bytes at off by a ranged GET, retried.
func (o *object) get(ctx context.Context, p []byte, off int64) error {
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(p))-1, 10)
	err := o.s.call(ctx, "GetObject", o.key, int64(len(p)), true, func(ctx context.Context) error {
		out, err := o.s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &o.s.bucket, Key: &o.key, Range: &rng})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if _, err := io.ReadFull(out.Body, p); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: range %s: %w", errShortBody, rng, err)
			}
			return err
		}
		return nil
	})
	if notFound(err) {
		return fmt.Errorf("%w: %w", sink.ErrNotFound, err)
	}
	return err
}
