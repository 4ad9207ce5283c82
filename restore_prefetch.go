package dlqdump

import (
	"errors"
	"sync"

	"github.com/dlqdump/dlqdump/segment"
)

// blockResult is a block read ahead, or the error reading it.
type blockResult struct {
	b    *segment.Block
	err  error
	free chan *segment.Block
}

func (br blockResult) release() { br.free <- br.b }

// prefetch reads and decodes blocks on its own goroutine, a few blocks ahead
// of delivery, so decompression overlaps delivery. stop ends it and waits.
func prefetch(sr *segment.Reader) (<-chan blockResult, func()) {
	const ahead = 2
	out := make(chan blockResult, ahead)
	free := make(chan *segment.Block, ahead+1)
	for range ahead + 1 {
		free <- new(segment.Block)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			var b *segment.Block
			select {
			case b = <-free:
			case <-done:
				return
			}
			err := sr.ReadBlock(b)
			if err != nil {
				free <- b
				b = nil
			}
			select {
			case out <- blockResult{b: b, err: err, free: free}:
			case <-done:
				return
			}
			var ce *segment.CorruptError
			if err != nil && !errors.As(err, &ce) {
				return // io.EOF or an I/O error
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
