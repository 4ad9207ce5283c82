package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ErrProto means a descriptor set or a message name is not usable.
var ErrProto = errors.New("dlqdump: protobuf descriptor")

// Proto formats protobuf payloads of one message type as protojson.
type Proto struct {
	mt    protoreflect.MessageType
	types *dynamicpb.Types
}

// NewProto returns the Proto of the message md, whose files are files.
func NewProto(files *protoregistry.Files, md protoreflect.MessageDescriptor) *Proto {
	return &Proto{mt: dynamicpb.NewMessageType(md), types: dynamicpb.NewTypes(files)}
}

// LoadProto parses a FileDescriptorSet (as protoc --include_imports
// --descriptor_set_out writes it) and returns the Proto of the message named
// name (its full name, or a short name unique in the set). Errors wrap
// ErrProto.
func LoadProto(set []byte, name string) (*Proto, error) {
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(set, &fds); err != nil {
		return nil, fmt.Errorf("%w: not a FileDescriptorSet (make one with protoc --include_imports --descriptor_set_out=FILE): %v", ErrProto, err)
	}
	files, err := protodesc.NewFiles(&fds)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (was it made with --include_imports?)", ErrProto, err)
	}
	md, found := FindMessage(files, name)
	switch {
	case md != nil:
		return NewProto(files, md), nil
	case len(found) == 0:
		return nil, fmt.Errorf("%w: no message %s in the set", ErrProto, name)
	}
	return nil, fmt.Errorf("%w: message %s is ambiguous (%s, %s, ...): give the full name", ErrProto, name, found[0].FullName(), found[1].FullName())
}

// FindMessage finds the message named name in files: by its full name, or
// by a short name that only one message (nested ones included) has. When
// none or several have it, md is nil and found lists them.
func FindMessage(files *protoregistry.Files, name string) (md protoreflect.MessageDescriptor, found []protoreflect.MessageDescriptor) {
	name = strings.TrimPrefix(name, ".")
	if d, err := files.FindDescriptorByName(protoreflect.FullName(name)); err == nil {
		if md, ok := d.(protoreflect.MessageDescriptor); ok {
			return md, nil
		}
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		found = appendMessages(found, fd.Messages(), name)
		return true
	})
	if len(found) == 1 {
		return found[0], nil
	}
	return nil, found
}

// appendMessages appends the messages, nested ones included, whose short
// name is name.
func appendMessages(dst []protoreflect.MessageDescriptor, msgs protoreflect.MessageDescriptors, name string) []protoreflect.MessageDescriptor {
	for i := range msgs.Len() {
		m := msgs.Get(i)
		if string(m.Name()) == name {
			dst = append(dst, m)
		}
		dst = appendMessages(dst, m.Messages(), name)
	}
	return dst
}

var _ protoregistry.MessageTypeResolver = (*dynamicpb.Types)(nil)

// Name returns the full name of the message.
func (p *Proto) Name() string { return string(p.mt.Descriptor().FullName()) }

// Format parses a payload and returns its protojson, compacted (protojson
// varies its spacing on purpose). warn says that the payload has fields the
// descriptor does not know (protojson leaves them out).
func (p *Proto) Format(payload []byte) (js []byte, warn string, err error) {
	m := p.mt.New().Interface()
	if err := (proto.UnmarshalOptions{Resolver: p.types}).Unmarshal(payload, m); err != nil {
		// protobuf-go puts non-breaking spaces in its messages at random.
		msg := strings.ReplaceAll(err.Error(), "\u00a0", " ")
		return nil, "", fmt.Errorf("not a %s: %s", p.mt.Descriptor().FullName(), msg)
	}
	if u := m.ProtoReflect().GetUnknown(); len(u) > 0 {
		warn = fmt.Sprintf("%d bytes of fields unknown to %s left out", len(u), p.mt.Descriptor().FullName())
	}
	js, err = protojson.MarshalOptions{Resolver: p.types}.Marshal(m)
	if err != nil {
		return nil, "", fmt.Errorf("protojson: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, js); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), warn, nil
}
