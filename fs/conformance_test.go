package fs_test

import (
	"testing"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sinktest"
)

// A Writer and a Reader on one directory pass the sink conformance suite.
func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Store {
		dir := t.TempDir()
		return sinktest.Store{Writer: &fs.Writer{Directory: dir}, Reader: &fs.Reader{Directory: dir}}
	})
}
