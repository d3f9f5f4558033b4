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

var _ keyfunc.ArraySource = (*Source)(nil)

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

// Fields returns the items of the repeated field of the request message at
// path, which has one "[*]" segment (see Fields). It makes Source a
// keyfunc.ArraySource: a key such as "item:{field.items[*].sku}" yields a
// name per item, which the adapters lock all at once.
func (s *Source) Fields(path string) ([]string, error) { return Fields(s.Message, path) }

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

// arrayMark ends the segment of a path that names a repeated field whose
// items Fields reads (keyfunc's syntax).
const arrayMark = "[*]"

// Fields returns the items of a repeated field of msg: path names the field
// with a segment that ends in "[*]", and what follows it, if anything, is
// the path of a scalar within each item. "ids[*]" gives every value of a
// repeated scalar field ids; "items[*].sku" gives the sku of every message
// of a repeated message field items. Values are formatted as Field formats
// them, and an item whose field is not set gives "" (keyfunc takes it as
// missing). An unset message on the way to the list gives no items. The
// errors are Field's: keyfunc.ErrUnreadable when msg is not a
// proto.Message, a set-up error when path does not lead through singular
// messages to a repeated field and then to a supported scalar (a map is
// not a repeated field).
func Fields(msg any, path string) ([]string, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%w: the request %T is not a protobuf message", keyfunc.ErrUnreadable, msg)
	}
	return fieldValues(m.ProtoReflect(), path)
}

// fieldKey is a path in a message type, for Field or (list) for Fields.
type fieldKey struct {
	msg  protoreflect.FullName
	path string
	list bool
}

// resolved is a path resolved in a message type: for Field, fds alone,
// the fields down to the scalar; for Fields, fds down to the repeated
// field, and item the fields within an item down to its scalar (none for
// a list of scalars).
type resolved struct {
	fds  []protoreflect.FieldDescriptor
	item []protoreflect.FieldDescriptor
	err  error
}

// fields caches the resolution of a path in a message type.
var fields sync.Map // fieldKey → resolved

// fieldValue reads the scalar at path in m.
func fieldValue(m protoreflect.Message, path string) (string, error) {
	desc := m.Descriptor()
	k := fieldKey{desc.FullName(), path, false}
	r, ok := fields.Load(k)
	if !ok {
		fds, err := resolve(desc, path)
		r, _ = fields.LoadOrStore(k, resolved{fds: fds, err: err})
	}
	res := r.(resolved)
	if res.err != nil {
		return "", res.err
	}
	return read(m, res.fds), nil
}

// read returns the scalar at the end of fds in m, "" when a field on the
// way or the scalar itself is not set.
func read(m protoreflect.Message, fds []protoreflect.FieldDescriptor) string {
	for _, fd := range fds[:len(fds)-1] {
		if !m.Has(fd) {
			return ""
		}
		m = m.Get(fd).Message()
	}
	leaf := fds[len(fds)-1]
	if !m.Has(leaf) {
		return ""
	}
	return scalar(leaf, m.Get(leaf))
}

// fieldValues reads the items of the repeated field at path in m.
func fieldValues(m protoreflect.Message, path string) ([]string, error) {
	desc := m.Descriptor()
	k := fieldKey{desc.FullName(), path, true}
	r, ok := fields.Load(k)
	if !ok {
		fds, item, err := resolveList(desc, path)
		r, _ = fields.LoadOrStore(k, resolved{fds, item, err})
	}
	res := r.(resolved)
	if res.err != nil {
		return nil, res.err
	}
	for _, fd := range res.fds[:len(res.fds)-1] {
		if !m.Has(fd) {
			return nil, nil
		}
		m = m.Get(fd).Message()
	}
	listFd := res.fds[len(res.fds)-1]
	list := m.Get(listFd).List()
	out := make([]string, list.Len())
	for i := range out {
		if res.item == nil {
			out[i] = scalar(listFd, list.Get(i))
		} else {
			out[i] = read(list.Get(i).Message(), res.item)
		}
	}
	return out, nil
}

// resolveList resolves a path with one "[*]" segment: the singular
// messages to the repeated field the segment names, and the fields of its
// items down to a supported scalar (none when the items are scalars).
func resolveList(md protoreflect.MessageDescriptor, path string) (fds, item []protoreflect.FieldDescriptor, err error) {
	head, rest, ok := strings.Cut(path, arrayMark)
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("protokey: field path %q: no %s segment names a repeated field", path, arrayMark)
	case strings.Contains(rest, arrayMark):
		return nil, nil, fmt.Errorf("protokey: field path %q: more than one %s", path, arrayMark)
	case rest != "" && !strings.HasPrefix(rest, "."):
		return nil, nil, fmt.Errorf("protokey: field path %q: %s must end a segment", path, arrayMark)
	}
	rest = strings.TrimPrefix(rest, ".")
	segs := strings.Split(head, ".")
	for i, seg := range segs {
		fd := byName(md, seg)
		if fd == nil {
			return nil, nil, fmt.Errorf("protokey: field path %q: message %s has no field %q", path, md.FullName(), seg)
		}
		fds = append(fds, fd)
		if i < len(segs)-1 {
			if fd.IsList() || fd.IsMap() || fd.Message() == nil {
				return nil, nil, fmt.Errorf("protokey: field path %q: %s is not a singular message", path, fd.FullName())
			}
			md = fd.Message()
			continue
		}
		if !fd.IsList() {
			return nil, nil, fmt.Errorf("protokey: field path %q: %s is not a repeated field", path, fd.FullName())
		}
	}
	list := fds[len(fds)-1]
	if rest == "" {
		if err := checkScalar(path, list); err != nil {
			return nil, nil, err
		}
		return fds, nil, nil
	}
	if list.Message() == nil {
		return nil, nil, fmt.Errorf("protokey: field path %q: the items of %s are not messages", path, list.FullName())
	}
	item, err = resolveIn(list.Message(), path, rest)
	return fds, item, err
}

// byName returns the field of md called name, by field name or JSON name.
func byName(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByName(protoreflect.Name(name)); fd != nil {
		return fd
	}
	return md.Fields().ByJSONName(name)
}

// checkScalar fails when fd is not of a kind a name part can be read from.
func checkScalar(path string, fd protoreflect.FieldDescriptor) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind, protoreflect.BytesKind, protoreflect.FloatKind, protoreflect.DoubleKind:
		return fmt.Errorf("protokey: field path %q: %s is of kind %v; want a string, bool, integer or enum", path, fd.FullName(), fd.Kind())
	}
	return nil
}

// resolve finds the fields along path, checking that every step but the last
// is a singular message and the last a supported scalar.
func resolve(md protoreflect.MessageDescriptor, path string) ([]protoreflect.FieldDescriptor, error) {
	return resolveIn(md, path, path)
}

// resolveIn is resolve of sub, the part of path that starts in md.
func resolveIn(md protoreflect.MessageDescriptor, path, sub string) ([]protoreflect.FieldDescriptor, error) {
	segs := strings.Split(sub, ".")
	fds := make([]protoreflect.FieldDescriptor, 0, len(segs))
	for i, seg := range segs {
		fd := byName(md, seg)
		if fd == nil {
			return nil, fmt.Errorf("protokey: field path %q: message %s has no field %q", path, md.FullName(), seg)
		}
		if fd.IsList() || fd.IsMap() {
			return nil, fmt.Errorf("protokey: field path %q: %s is repeated or a map (a key names the items of a repeated field with %q)", path, fd.FullName(), seg+arrayMark)
		}
		fds = append(fds, fd)
		if i < len(segs)-1 {
			if fd.Message() == nil {
				return nil, fmt.Errorf("protokey: field path %q: %s is not a message", path, fd.FullName())
			}
			md = fd.Message()
			continue
		}
		if err := checkScalar(path, fd); err != nil {
			return nil, err
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
