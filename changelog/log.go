package changelog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/sink"
)

// Table is the name of the table (sink.Tables) the log is kept in:
// DIR/.tables/changelog/ in a directory, PREFIX.tables/changelog/ on S3.
const Table = "changelog"

// The table holds one record per page, keyed "p" and the page's number
// (from 1) in twelve digits, so that the keys sort in page order:
//
//	p000000000001  {"v":1,"entries":[{"seq":1,...},...,{"seq":64,...}]}
//	p000000000002  {"v":1,"entries":[{"seq":65,...}]}
//
// A page is full once it holds pageEntries entries or pageBytes bytes, a
// rule of its contents alone: every appender sees the same page full, so no
// entry is ever appended to a page after the next one was started.
const (
	pagePrefix  = "p"
	pageDigits  = 12
	pageBytes   = 24 << 10
	pageVersion = 1
)

// pageEntries is the most entries of a page (tests make it smaller).
var pageEntries = 64

// Errors of the change log.
var (
	// ErrNoTables means the store keeps no tables, where the log lives.
	ErrNoTables = errors.New("dlqdump: the store keeps no tables (sink.Tables), where the change log lives")
	// ErrBroken means the log's chain is broken: an entry was changed or
	// removed after it was written (Verify says which), or a page cannot
	// be read as one.
	ErrBroken = errors.New("dlqdump: the change log is broken")
)

// Log is the change log of a store. It is safe for concurrent use, and any
// number of Logs, in any number of processes, may append to the same store.
type Log struct {
	t   sink.Records
	now func() time.Time
	// head is the number of the last page this Log saw, a hint where to
	// start the next append (0: list the pages to find it).
	head atomic.Uint64
}

// Open returns the change log of the store rd, which must keep tables
// (sink.Tables: fs.Reader and s3.Reader do).
func Open(rd sink.Reader) (*Log, error) {
	tb, ok := rd.(sink.Tables)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrNoTables, rd)
	}
	t, err := tb.Table(Table)
	if err != nil {
		return nil, err
	}
	return &Log{t: t, now: time.Now}, nil
}

// page is the record of a page.
type page struct {
	V       int     `json:"v"`
	Entries []Entry `json:"entries"`
}

func pageKey(n uint64) string {
	s := strconv.FormatUint(n, 10)
	return pagePrefix + strings.Repeat("0", max(0, pageDigits-len(s))) + s
}

// parsePageKey returns the number of a page's key.
func parsePageKey(key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, pagePrefix)
	if !ok || len(s) != pageDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}

// full reports whether no entry may be added to the page.
func (p *page) full(size int) bool { return len(p.Entries) >= pageEntries || size >= pageBytes }

func (p *page) last() *Entry {
	if len(p.Entries) == 0 {
		return nil
	}
	return &p.Entries[len(p.Entries)-1]
}

func (p *page) find(nonce string) *Entry {
	for i := range p.Entries {
		if p.Entries[i].Nonce == nonce {
			return &p.Entries[i]
		}
	}
	return nil
}

// readPage reads page n: ok false when there is none.
func (l *Log) readPage(ctx context.Context, n uint64) (p page, size int, version string, ok bool, err error) {
	data, version, err := l.t.ReadRecord(ctx, pageKey(n))
	if errors.Is(err, sink.ErrNotFound) {
		return page{}, 0, "", false, nil
	}
	if err != nil {
		return page{}, 0, "", false, fmt.Errorf("dlqdump: change log: read page %d: %w", n, err)
	}
	if err := json.Unmarshal(data, &p); err != nil || p.V != pageVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", p.V, pageVersion)
		}
		return page{}, 0, "", false, fmt.Errorf("%w: page %d: %v", ErrBroken, n, err)
	}
	return p, len(data), version, true, nil
}

// lastPage returns the number of the last page, 0 when there is none.
func (l *Log) lastPage(ctx context.Context) (uint64, error) {
	var last uint64
	for key, err := range l.t.RecordNames(ctx) {
		if err != nil {
			return 0, fmt.Errorf("dlqdump: change log: list its pages: %w", err)
		}
		if n, ok := parsePageKey(key); ok {
			last = max(last, n)
		}
	}
	return last, nil
}

// Attempts of an append: failures of the store (each retried after a
// back-off), and races lost to other appenders (each meaning another entry
// was appended).
const (
	maxFailures = 6
	maxRaces    = 10_000
)

// Append adds e to the log and returns it as appended, with its Seq, Time,
// Nonce, Prev and Hash set. Fields longer than their bounds (MaxScope, ...)
// are cut. A failure of the store is retried a few times with back-off; an
// error means the entry may or may not have been appended.
func (l *Log) Append(ctx context.Context, e Entry) (Entry, error) {
	if e.Action == "" {
		return Entry{}, fmt.Errorf("dlqdump: change log: an entry needs an Action")
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return Entry{}, err
	}
	e.Nonce = hex.EncodeToString(nonce[:])
	e.normalize()
	e.Seq, e.Prev, e.Hash = 0, "", ""

	n := l.head.Load()
	var prev *Entry // the last entry of page n-1, when known
	failures, races := 0, 0
	fail := func(err error) error {
		failures++
		if failures >= maxFailures || ctx.Err() != nil {
			return err
		}
		return backoff.Sleep(ctx, backoff.FullJitter(20*time.Millisecond, 2*time.Second, failures))
	}
	for {
		if n == 0 {
			last, err := l.lastPage(ctx)
			if err != nil {
				if err := fail(err); err != nil {
					return Entry{}, err
				}
				continue
			}
			n = max(last, 1)
		}
		p, size, version, ok, err := l.readPage(ctx, n)
		if err != nil {
			if errors.Is(err, ErrBroken) {
				return Entry{}, err
			}
			if err := fail(err); err != nil {
				return Entry{}, err
			}
			continue
		}
		if ok {
			if mine := p.find(e.Nonce); mine != nil {
				// An earlier write of this append took effect.
				l.head.Store(n)
				return *mine, nil
			}
			if p.full(size) {
				prev = p.last()
				n++
				continue
			}
		}
		if !ok && n > 1 && prev == nil {
			// The page before is needed for its last entry.
			n--
			continue
		}
		switch last := p.last(); {
		case last != nil:
			e.Seq, e.Prev = last.Seq+1, last.Hash
		case prev != nil:
			e.Seq, e.Prev = prev.Seq+1, prev.Hash
		default:
			e.Seq, e.Prev = 1, ""
		}
		e.Hash = e.Sum()
		p.V = pageVersion
		p.Entries = append(p.Entries, e)
		data, err := json.Marshal(&p)
		if err != nil {
			return Entry{}, err
		}
		if len(data) > sink.MaxRecordSize {
			return Entry{}, fmt.Errorf("dlqdump: change log: page %d would take %d bytes", n, len(data))
		}
		_, err = l.t.WriteRecord(ctx, pageKey(n), data, version)
		switch {
		case err == nil:
			l.head.Store(n)
			return e, nil
		case errors.Is(err, sink.ErrConflict):
			// Another appender was first (or this one's earlier write
			// took effect): read the page again.
			races++
			if races >= maxRaces {
				return Entry{}, fmt.Errorf("dlqdump: change log: page %d changed %d times while appending: %w", n, races, err)
			}
			if err := backoff.Sleep(ctx, backoff.FullJitter(time.Millisecond, 50*time.Millisecond, min(races, 6))); err != nil {
				return Entry{}, err
			}
		default:
			if err := fail(fmt.Errorf("dlqdump: change log: write page %d: %w", n, err)); err != nil {
				return Entry{}, err
			}
		}
	}
}
