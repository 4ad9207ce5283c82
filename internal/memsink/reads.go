package memsink

import (
	"context"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

// Reads is a Store whose segments' bytes read are counted by segment name:
// what a Restorer over it reads.
type Reads struct {
	*Store
	mu   sync.Mutex
	read map[string]int64
}

// CountReads returns s counting the bytes read from its segments.
func CountReads(s *Store) *Reads { return &Reads{Store: s, read: map[string]int64{}} }

// Open opens a segment whose reads are counted.
func (c *Reads) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := c.Store.Open(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return readsFile{File: f, c: c, name: name}, nil
}

// Take returns the bytes read from each segment since the last Take.
func (c *Reads) Take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.read
	c.read = map[string]int64{}
	return m
}

type readsFile struct {
	sink.File
	c    *Reads
	name string
}

func (f readsFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.mu.Lock()
	f.c.read[f.name] += int64(n)
	f.c.mu.Unlock()
	return n, err
}
