package dlqdump

import "github.com/dlqdump/dlqdump/sink"

// Writer is where a Queue publishes segments (seed: Writer): a directory
// (fs.Writer) or an S3 prefix (s3.Writer). What a Writer implements is in
// package sink, which sink authors read; users only pick one.
type Writer = sink.Writer

// Reader is where a Restorer finds segments (seed: Reader): a directory
// (fs.Reader) or an S3 prefix (s3.Reader). See package sink.
type Reader = sink.Reader

// Area is a part of a store: ready segments, quarantined ones, archived
// ones (see sink.Area).
type Area = sink.Area

// Areas.
const (
	AreaReady      = sink.AreaReady
	AreaQuarantine = sink.AreaQuarantine
	AreaArchive    = sink.AreaArchive
)
