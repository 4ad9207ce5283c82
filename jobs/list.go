package jobs

// Listing the jobs: every job's record, read again only when it changed
// where the store's listing tells each record's version.

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/dlqdump/dlqdump/sink"
)

// List returns the jobs, in the order of their IDs; with states, only
// those in one of them. It lists every job and reads each one's record,
// except, on a store whose listing tells each record's version (S3: the
// ETag), the records it read at that version before: a console refreshing
// a page of 10,000 unchanged jobs then costs a listing, not 10,000 reads.
// The records kept for this take what the jobs' records take (about 250 B
// a job). A job listed is shown as of the listing, which S3 makes
// consistent with the writes before it.
func (s *Store) List(ctx context.Context, states ...State) iter.Seq2[Job, error] {
	return func(yield func(Job, error) bool) {
		seen := map[string]bool{}
		for nv, err := range s.jobVersions(ctx) {
			if err != nil {
				yield(Job{}, err)
				return
			}
			id, ok := strings.CutPrefix(nv.Name, jobKind)
			if !ok {
				if nv.Name > jobKind {
					break // past the jobs
				}
				continue
			}
			seen[id] = true
			e, err := s.readListed(ctx, id, nv.Version)
			if errors.Is(err, ErrNotFound) {
				continue // removed meanwhile
			}
			if err != nil {
				if !yield(Job{ID: id}, err) {
					return
				}
				continue
			}
			if len(states) > 0 && !slices.Contains(states, e.job.State) {
				continue
			}
			if !yield(e.job, nil) {
				return
			}
		}
		s.listed.keepOnly(seen) // a whole listing: the jobs removed go
	}
}

// jobVersions lists the jobs' records with their versions, or with none
// where the store does not list them.
func (s *Store) jobVersions(ctx context.Context) iter.Seq2[sink.NameVersion, error] {
	if vl, ok := s.t.(sink.VersionLister); ok {
		return vl.RecordVersions(ctx)
	}
	return func(yield func(sink.NameVersion, error) bool) {
		for name, err := range s.t.RecordNames(ctx) {
			if !yield(sink.NameVersion{Name: name}, err) || err != nil {
				return
			}
		}
	}
}

// readListed returns the job of id, listed at version: the record kept
// from an earlier List if it is of that version, else the record read.
func (s *Store) readListed(ctx context.Context, id, version string) (*entry, error) {
	if version == "" {
		return s.read(ctx, id)
	}
	if data, ok := s.listed.get(id, version); ok {
		e := &entry{version: version}
		if err := e.parse(data); err == nil {
			return e, nil
		}
	}
	data, version, err := s.t.ReadRecord(ctx, jobKey(id))
	if errors.Is(err, sink.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	e := &entry{version: version}
	if err := e.parse(data); err != nil {
		return nil, errJob(id, err)
	}
	s.listed.put(id, version, bytes.Clone(data)) // not the read's spare capacity
	return e, nil
}

// listCache keeps the job records List read, by ID, with their versions.
type listCache struct {
	mu   sync.Mutex
	recs map[string]listedRecord
}

type listedRecord struct {
	version string
	data    []byte
}

func (c *listCache) get(id, version string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.recs[id]
	return r.data, ok && r.version == version
}

func (c *listCache) put(id, version string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs == nil {
		c.recs = map[string]listedRecord{}
	}
	c.recs[id] = listedRecord{version: version, data: data}
}

// keepOnly forgets the records of the jobs not in ids.
func (c *listCache) keepOnly(ids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.recs {
		if !ids[id] {
			delete(c.recs, id)
		}
	}
}
