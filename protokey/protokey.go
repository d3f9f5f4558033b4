package protokey

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/reqlock/reqlock/keyfunc"
)

// Source is the keyfunc.Source of an RPC call: its method, its headers or
// metadata, and its request message. Path and query parameters exist only
// where a transport gives them (an RPC over an HTTP route, as Kratos's HTTP
// transport serves): without PathParam and QueryParam, Param and Query fail
// with keyfunc.ErrUnsupported.
type Source struct {
	// Method is the full method, procedure or operation of the call, such
	// as "/orders.v1.Orders/Pay": the Route.
	Method string
	// Headers returns the first value of a header or metadata key,
	// case-insensitively; "" when absent. nil means no headers.
	Headers func(name string) string
	// Message is the request message, a proto.Message.
	Message any
	// PathParam returns a path parameter; nil means the call has none.
	PathParam func(name string) string
	// QueryParam returns the first value of a query parameter; nil means
	// the call has none.
	QueryParam func(name string) string
}

// Route returns s.Method.
func (s *Source) Route() string { return s.Method }

// Param returns the path parameter called name; it fails with
// keyfunc.ErrUnsupported when s has no PathParam.
func (s *Source) Param(name string) (string, error) {
	if s.PathParam == nil {
		return "", fmt.Errorf("%w: RPC calls have no path parameters", keyfunc.ErrUnsupported)
	}
	return s.PathParam(name), nil
}

// Query returns the first value of the query parameter called name; it
// fails with keyfunc.ErrUnsupported when s has no QueryParam.
func (s *Source) Query(name string) (string, error) {
	if s.QueryParam == nil {
		return "", fmt.Errorf("%w: RPC calls have no query parameters", keyfunc.ErrUnsupported)
	}
	return s.QueryParam(name), nil
}

// Header returns the first value of the header or metadata key name.
func (s *Source) Header(name string) (string, error) {
	if s.Headers == nil {
		return "", nil
	}
	return s.Headers(name), nil
}

// Field returns the field of the request message at path (see Field).
func (s *Source) Field(path string) (string, error) { return Field(s.Message, path) }

// Field returns the scalar at path in msg, formatted as the package
// documentation says; "" when a message on the way or the field itself is
// not set. It fails with an error wrapping keyfunc.ErrUnreadable when msg is
// not a proto.Message, and with a set-up error when path does not lead to a
// supported scalar.
func Field(msg any, path string) (string, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return "", fmt.Errorf("%w: the request %T is not a protobuf message", keyfunc.ErrUnreadable, msg)
	}
	return fieldValue(m.ProtoReflect(), path)
}

type fieldKey struct {
	msg  protoreflect.FullName
	path string
}

type resolved struct {
	fds []protoreflect.FieldDescriptor
	err error
}

// fields caches the resolution of a path in a message type.
var fields sync.Map // fieldKey → resolved

// fieldValue reads the scalar at path in m.
func fieldValue(m protoreflect.Message, path string) (string, error) {
	desc := m.Descriptor()
	k := fieldKey{desc.FullName(), path}
	r, ok := fields.Load(k)
	if !ok {
		fds, err := resolve(desc, path)
		r, _ = fields.LoadOrStore(k, resolved{fds, err})
	}
	res := r.(resolved)
	if res.err != nil {
		return "", res.err
	}
	for _, fd := range res.fds[:len(res.fds)-1] {
		if !m.Has(fd) {
			return "", nil
		}
		m = m.Get(fd).Message()
	}
	leaf := res.fds[len(res.fds)-1]
	if !m.Has(leaf) {
		return "", nil
	}
	return scalar(leaf, m.Get(leaf)), nil
}

// resolve finds the fields along path, checking that every step but the last
// is a singular message and the last a supported scalar.
func resolve(md protoreflect.MessageDescriptor, path string) ([]protoreflect.FieldDescriptor, error) {
	segs := strings.Split(path, ".")
	fds := make([]protoreflect.FieldDescriptor, 0, len(segs))
	for i, seg := range segs {
		fd := md.Fields().ByName(protoreflect.Name(seg))
		if fd == nil {
			fd = md.Fields().ByJSONName(seg)
		}
		if fd == nil {
			return nil, fmt.Errorf("protokey: field path %q: message %s has no field %q", path, md.FullName(), seg)
		}
		if fd.IsList() || fd.IsMap() {
			return nil, fmt.Errorf("protokey: field path %q: %s is repeated or a map", path, fd.FullName())
		}
		fds = append(fds, fd)
		if i < len(segs)-1 {
			if fd.Message() == nil {
				return nil, fmt.Errorf("protokey: field path %q: %s is not a message", path, fd.FullName())
			}
			md = fd.Message()
			continue
		}
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind, protoreflect.BytesKind, protoreflect.FloatKind, protoreflect.DoubleKind:
			return nil, fmt.Errorf("protokey: field path %q: %s is of kind %v; want a string, bool, integer or enum", path, fd.FullName(), fd.Kind())
		}
	}
	return fds, nil
}

// scalar formats a supported scalar value.
func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10)
	}
	return strconv.FormatInt(v.Int(), 10)
}
