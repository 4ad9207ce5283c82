package segment

// The memory a stream keeps for reuse: buffers for the stored bytes the
// workers decompress, and with Reuse the raw bytes of released blocks.

// rawBuf returns memory for n raw bytes: new, or a released block's with
// Reuse.
func (st *stream) rawBuf(n int) []byte {
	if st.reuse {
		return st.get(&st.raws, n)
	}
	return make([]byte, 0, n)
}

// maxStored caps the bytes of the stored bytes' buffers kept: a few for each
// worker.
func (st *stream) maxStored() int64 { return int64(2*st.workers+4) * readAhead }

// bufList is buffers kept for reuse, and their total capacity.
type bufList struct {
	bufs  [][]byte
	bytes int64
}

// get returns a buffer of l with room for n bytes, or a new one with room
// for an eighth more, as the blocks of a segment differ by a few bytes.
func (st *stream) get(l *bufList, n int) []byte {
	st.mu.Lock()
	for i, b := range l.bufs {
		if cap(b) >= n {
			last := len(l.bufs) - 1
			l.bufs[i], l.bufs[last] = l.bufs[last], nil
			l.bufs = l.bufs[:last]
			l.bytes -= int64(cap(b))
			st.mu.Unlock()
			return b[:0]
		}
	}
	st.mu.Unlock()
	return make([]byte, 0, n+n/8)
}

// put keeps b in l unless l would then hold more than limit bytes.
func (st *stream) put(l *bufList, b []byte, limit int64) {
	if cap(b) == 0 {
		return
	}
	st.mu.Lock()
	if !st.closed && l.bytes+int64(cap(b)) <= limit {
		l.bufs = append(l.bufs, b[:0])
		l.bytes += int64(cap(b))
	}
	st.mu.Unlock()
}
