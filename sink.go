package dlqdump

import "github.com/dlqdump/dlqdump/sink"

// Writer is where a Queue publishes segments (seed: Writer): a directory
// (fs.Writer) or an S3 prefix (s3.Writer). See package sink.
type Writer = sink.Writer

// SegmentWriter receives the bytes of one segment; see package sink.
type SegmentWriter = sink.SegmentWriter

// Recoverer is implemented by Writers that recover unfinished segments; see
// package sink.
type Recoverer = sink.Recoverer

// Backlogger is implemented by Writers that store committed segments later;
// see package sink.
type Backlogger = sink.Backlogger

// Reader is where a Restorer finds segments (seed: Reader): a directory
// (fs.Reader) or an S3 prefix (s3.Reader). See package sink.
type Reader = sink.Reader

// Area is a part of a store; see sink.Area. (Transitional alias.)
type Area = sink.Area

// Areas (transitional aliases of sink's).
const (
	AreaReady      = sink.AreaReady
	AreaQuarantine = sink.AreaQuarantine
	AreaArchive    = sink.AreaArchive
)
