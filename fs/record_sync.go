package fs

import (
	"sync"
	"time"
)

// syncEvery is the longest a record written by a Reader stays unsynced: the
// first write of a record is synced, and then every write that comes later
// than this after the last sync.
var syncEvery = time.Second

// syncRecord syncs a record file (syncRecordFile; tests count the calls).
var syncRecord = syncRecordFile

// recordSyncs remembers when a Reader last synced each record it writes. The
// zero value is ready to use.
type recordSyncs struct {
	mu   sync.Mutex
	last map[string]time.Time // by the record's first file; only the last syncEvery
}

// due reports whether a write of the record base must be synced, and
// whether the Reader has no sync of it on record (then the records
// directory is synced too: the record's file may be new to the disk).
func (s *recordSyncs) due(base string) (due, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.last[base]
	return !ok || time.Since(t) >= syncEvery, !ok
}

// done notes that the record base was synced now.
func (s *recordSyncs) done(base string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]time.Time{}
	}
	if len(s.last) >= 256 {
		// Only the syncs of the last syncEvery matter: an older one is
		// as good as none.
		for b, t := range s.last {
			if now.Sub(t) >= syncEvery {
				delete(s.last, b)
			}
		}
	}
	s.last[base] = now
}

// forget drops the record base (removed).
func (s *recordSyncs) forget(base string) {
	s.mu.Lock()
	delete(s.last, base)
	s.mu.Unlock()
}
