package s3

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum returns the CRC-32C of size bytes of r, in hex.
func checksum(r io.ReaderAt, size int64) (string, error) {
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%08x", h.Sum32()), nil
}

// upload is one object to store.
type upload struct {
	key  string
	body io.ReaderAt
	size int64
	crc  string            // MetaChecksum
	meta map[string]string // more user metadata, may be nil
}

func (u *upload) metadata() map[string]string {
	m := make(map[string]string, len(u.meta)+1)
	for k, v := range u.meta {
		m[k] = v
	}
	m[MetaChecksum] = u.crc
	return m
}

// put stores u unless an object already exists at its key: with
// If-None-Match: * a retried attempt never overwrites nor duplicates. When
// the object is there already, put succeeds if it is u itself (same size and
// checksum: an earlier attempt whose answer was lost) and fails with
// ErrConflict otherwise. Segments above the multipart threshold go up in
// parts, in parallel; a failed multipart upload is aborted, and once the
// segment is stored every other unfinished upload of its key is too (see
// abortOthers). bounded says whether transient failures are retried up to
// Retry.MaxAttempts or until ctx is done.
func (s *store) put(ctx context.Context, u *upload, bounded bool) error {
	if u.size > s.multipartThreshold {
		err := s.putMultipart(ctx, u, bounded)
		if err != nil && preconditionFailed(err) {
			err = s.checkExisting(ctx, u, bounded, err)
		}
		if err == nil {
			s.abortOthers(ctx, u.key)
		}
		return err
	}
	err := s.call(ctx, "PutObject", u.key, u.size, bounded, func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket:        &s.bucket,
			Key:           &u.key,
			Body:          io.NewSectionReader(u.body, 0, u.size),
			ContentLength: aws.Int64(u.size),
			ContentType:   aws.String("application/octet-stream"),
			IfNoneMatch:   aws.String("*"),
			Metadata:      u.metadata(),
		})
		return err
	})
	if err == nil || !preconditionFailed(err) {
		return err
	}
	return s.checkExisting(ctx, u, bounded, err)
}

// checkExisting decides, after a failed If-None-Match, whether the object at
// u.key is u.
func (s *store) checkExisting(ctx context.Context, u *upload, bounded bool, cause error) error {
	var out *awss3.HeadObjectOutput
	err := s.call(ctx, "HeadObject", u.key, 0, bounded, func(ctx context.Context) error {
		var err error
		out, err = s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &u.key})
		return err
	})
	if err != nil {
		return errors.Join(cause, err)
	}
	if aws.ToInt64(out.ContentLength) == u.size && out.Metadata[MetaChecksum] == u.crc {
		return nil // our own earlier attempt
	}
	return s.opErr("PutObject", u.key, fmt.Errorf("%w: it has %d bytes and checksum %q, the segment %d bytes and checksum %q",
		ErrConflict, aws.ToInt64(out.ContentLength), out.Metadata[MetaChecksum], u.size, u.crc))
}

// putMultipart uploads u in parts and completes the upload with
// If-None-Match: *.
func (s *store) putMultipart(ctx context.Context, u *upload, bounded bool) error {
	partSize := max(s.partSize, (u.size+maxParts-1)/maxParts)
	var id string
	completed := false
	defer func() {
		if completed {
			return
		}
		if id != "" {
			s.abortMultipart(ctx, u.key, id)
		}
		if ctx.Err() != nil {
			// Giving up: a CreateMultipartUpload cut off by ctx may
			// have taken effect unseen; nobody would retry it.
			s.abortOthers(ctx, u.key)
		}
	}()
	err := s.call(ctx, "CreateMultipartUpload", u.key, 0, bounded, func(ctx context.Context) error {
		out, err := s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
			Bucket:      &s.bucket,
			Key:         &u.key,
			ContentType: aws.String("application/octet-stream"),
			Metadata:    u.metadata(),
		})
		if err == nil {
			id = aws.ToString(out.UploadId)
		}
		return err
	})
	if err != nil {
		return err
	}

	n := int((u.size + partSize - 1) / partSize)
	parts := make([]types.CompletedPart, n)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range min(s.partConcurrency, n) {
		wg.Go(func() {
			for i := range next {
				off := int64(i) * partSize
				size := min(partSize, u.size-off)
				num := int32(i + 1)
				err := s.call(pctx, "UploadPart", u.key+" part "+strconv.Itoa(i+1), size, bounded, func(ctx context.Context) error {
					out, err := s.client.UploadPart(ctx, &awss3.UploadPartInput{
						Bucket:        &s.bucket,
						Key:           &u.key,
						UploadId:      &id,
						PartNumber:    &num,
						Body:          io.NewSectionReader(u.body, off, size),
						ContentLength: aws.Int64(size),
					})
					if err == nil {
						parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: &num}
					}
					return err
				})
				if err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-pctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return s.opErr("UploadPart", u.key, err)
	}
	err = s.call(ctx, "CompleteMultipartUpload", u.key, 0, bounded, func(ctx context.Context) error {
		_, err := s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
			Bucket:          &s.bucket,
			Key:             &u.key,
			UploadId:        &id,
			IfNoneMatch:     aws.String("*"),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		return err
	})
	if err == nil {
		completed = true
		return nil
	}
	if apiCode(err) == "NoSuchUpload" {
		// A retried Complete whose first attempt went through.
		if cerr := s.checkExisting(ctx, u, bounded, err); cerr == nil {
			completed = true
			return nil
		}
	}
	return err
}
