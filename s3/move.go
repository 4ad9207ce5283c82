package s3

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqdump/dlqdump/sink"
)

// Move moves a segment to another area: a server-side copy, made only if no
// object is at the destination (If-None-Match: *, on servers that honour it
// for copies, and a HeadObject before it), with the reason in the metadata
// when moved to quarantine and without it otherwise, then a delete of the
// source. A segment of that name already at the destination is an error
// wrapping sink.ErrExist, unless it holds the same bytes (same size and
// checksum, computed by reading an object stored without one: an earlier
// Move that got that far), when the source is deleted.
// A missing segment is an error wrapping sink.ErrNotFound.
func (r *Reader) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	if from == to {
		if to != sink.AreaQuarantine {
			return nil
		}
		return s.setReason(ctx, name, reason)
	}
	if _, err := s.areaPrefix(to); err != nil {
		return err
	}
	return s.move(ctx, from, name, to, name, reason)
}

// Unstage moves a staged segment into an area under its own name, as Move
// moves a segment (see sink.Reader).
func (r *Reader) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	s, err := r.state()
	if err != nil {
		return err
	}
	if to == sink.AreaStaging {
		return fmt.Errorf("dlqdump: s3: unstage %s into the staging area", staged)
	}
	if _, err := s.areaPrefix(to); err != nil {
		return err
	}
	return s.move(ctx, sink.AreaStaging, staged, to, name, reason)
}

// move copies segment name of area from to segment newName of area to,
// unless something is there, and deletes the original.
func (s *store) move(ctx context.Context, from sink.Area, name string, to sink.Area, newName, reason string) error {
	src, out, err := s.headSegment(ctx, from, name)
	if err != nil {
		return err
	}
	dst, err := s.key(to, newName)
	if err != nil {
		return err
	}
	if there, err := s.same(ctx, dst, src, out); err != nil {
		return err
	} else if !there {
		meta := map[string]string{}
		if v := out.Metadata[MetaChecksum]; v != "" {
			meta[MetaChecksum] = v
		}
		if to == sink.AreaQuarantine {
			// Set even when empty: some servers (gofakes3) merge the
			// source's metadata into a copy's despite REPLACE.
			meta[MetaReason] = encodeReason(reason)
		}
		err := s.call(ctx, "CopyObject", dst, aws.ToInt64(out.ContentLength), true, func(ctx context.Context) error {
			_, err := s.client.CopyObject(ctx, &awss3.CopyObjectInput{
				Bucket:            &s.bucket,
				Key:               &dst,
				CopySource:        aws.String(copySource(s.bucket, src)),
				MetadataDirective: types.MetadataDirectiveReplace,
				ContentType:       aws.String("application/octet-stream"),
				Metadata:          meta,
				IfNoneMatch:       aws.String("*"),
			})
			return err
		})
		if err != nil {
			if !preconditionFailed(err) {
				return err
			}
			if there, herr := s.same(ctx, dst, src, out); herr != nil || !there {
				return fmt.Errorf("%w: %s segment %s: %w", sink.ErrExist, to, newName, err)
			}
		}
	}
	return s.deleteKey(ctx, src)
}

// same reports whether an object at key holds the segment at srcKey,
// described by src: the same size and checksum. An object stored without
// dlqdump's checksum (by another tool) has its bytes' checksum computed, by
// reading it, when the sizes are equal. It returns an error wrapping
// sink.ErrExist when another object is there.
func (s *store) same(ctx context.Context, key, srcKey string, src *awss3.HeadObjectOutput) (bool, error) {
	out, err := s.head(ctx, key)
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	size := aws.ToInt64(src.ContentLength)
	sum, got := src.Metadata[MetaChecksum], out.Metadata[MetaChecksum]
	if aws.ToInt64(out.ContentLength) == size {
		if sum == "" {
			if sum, err = s.checksumOf(ctx, srcKey, size); err != nil {
				return false, err
			}
		}
		if got == "" {
			if got, err = s.checksumOf(ctx, key, size); err != nil {
				return false, err
			}
		}
		if sum == got {
			return true, nil
		}
	}
	return false, s.opErr("CopyObject", key, fmt.Errorf("%w: another object (%d bytes, checksum %q) is there", sink.ErrExist, aws.ToInt64(out.ContentLength), got))
}

// checksumOf reads the object at key and returns the CRC-32C of its bytes
// in hex, as MetaChecksum holds it.
func (s *store) checksumOf(ctx context.Context, key string, size int64) (string, error) {
	var sum string
	err := s.call(ctx, "GetObject", key, size, true, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		h := crc32.New(castagnoli)
		if _, err := io.Copy(h, out.Body); err != nil {
			return err
		}
		sum = fmt.Sprintf("%08x", h.Sum32())
		return nil
	})
	return sum, err
}

// setReason replaces the reason of a quarantined segment: a copy onto
// itself with new metadata.
func (s *store) setReason(ctx context.Context, name, reason string) error {
	key, out, err := s.headSegment(ctx, sink.AreaQuarantine, name)
	if err != nil {
		return err
	}
	meta := map[string]string{MetaReason: encodeReason(reason)}
	if v := out.Metadata[MetaChecksum]; v != "" {
		meta[MetaChecksum] = v
	}
	return s.call(ctx, "CopyObject", key, aws.ToInt64(out.ContentLength), true, func(ctx context.Context) error {
		_, err := s.client.CopyObject(ctx, &awss3.CopyObjectInput{
			Bucket:            &s.bucket,
			Key:               &key,
			CopySource:        aws.String(copySource(s.bucket, key)),
			MetadataDirective: types.MetadataDirectiveReplace,
			ContentType:       aws.String("application/octet-stream"),
			Metadata:          meta,
		})
		return err
	})
}

func copySource(bucket, key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return url.PathEscape(bucket) + "/" + strings.Join(parts, "/")
}
