package main

import (
	"context"
	"errors"

	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/sink"
)

// s3Usage returns the bytes and number of the ready segments under s.Prefix.
func s3Usage(s *spec) (int64, int, error) {
	r := &s3.Reader{Client: s.S3.Client(), Bucket: s.S3.Bucket, Prefix: s.Prefix}
	var total int64
	var n int
	for si, err := range r.List(context.Background(), sink.AreaReady) {
		if err != nil {
			return 0, 0, err
		}
		total += si.Size
		n++
	}
	return total, n, nil
}

// s3Clean deletes the segments of every area under prefix.
func s3Clean(s *spec, prefix string) error {
	ctx := context.Background()
	r := &s3.Reader{Client: s.S3.Client(), Bucket: s.S3.Bucket, Prefix: prefix}
	var errs []error
	for _, area := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		var names []string
		for si, err := range r.List(ctx, area) {
			if err != nil {
				return err
			}
			names = append(names, si.Name)
		}
		for _, name := range names {
			if err := r.Delete(ctx, area, name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
