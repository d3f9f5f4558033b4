package protokey_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/reqlock/reqlock/keyfunc"
	"github.com/reqlock/reqlock/protokey"
)

// The messages of descriptor.proto have fields of every kind a path can meet.
var (
	field = &descriptorpb.FieldDescriptorProto{
		Name: proto.String("A:1"), Number: proto.Int32(-7), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
		JsonName: proto.String("aOne"), Options: &descriptorpb.FieldOptions{Packed: proto.Bool(true)},
	}
	option = &descriptorpb.UninterpretedOption{
		PositiveIntValue: proto.Uint64(3), DoubleValue: proto.Float64(1.5), StringValue: []byte("b"),
		Name: []*descriptorpb.UninterpretedOption_NamePart{{NamePart: proto.String("x")}},
	}
)

func TestFieldKinds(t *testing.T) {
	for _, tc := range []struct {
		msg        proto.Message
		path, want string
	}{
		{field, "name", "A:1"},
		{field, "number", "-7"},
		{field, "type", "TYPE_STRING"},
		{field, "json_name", "aOne"},
		{field, "jsonName", "aOne"}, // by JSON name
		{field, "options.packed", "true"},
		{option, "positive_int_value", "3"},
		{&descriptorpb.FieldDescriptorProto{Type: descriptorpb.FieldDescriptorProto_Type(99).Enum()}, "type", "99"},
		{&descriptorpb.FieldDescriptorProto{}, "name", ""},           // not set
		{&descriptorpb.FieldDescriptorProto{}, "options.packed", ""}, // a message on the way not set
		{&descriptorpb.FieldDescriptorProto{Name: proto.String("")}, "name", ""},
	} {
		got, err := protokey.Field(tc.msg, tc.path)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
}

func TestFieldSetupErrors(t *testing.T) {
	for path, want := range map[string]string{
		"name.x":                       "is not a message",
		"nope":                         `has no field "nope"`,
		"options":                      "is of kind message",
		"options.uninterpreted_option": "is repeated or a map",
	} {
		_, err := protokey.Field(field, path)
		if err == nil || !strings.HasPrefix(err.Error(), "protokey: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", path, err, want)
		}
		if errors.Is(err, keyfunc.ErrUnreadable) || errors.Is(err, keyfunc.ErrMissing) {
			t.Errorf("%s: %v is a set-up error, not a bad request", path, err)
		}
	}
	for _, path := range []string{"double_value", "string_value", "name"} {
		if _, err := protokey.Field(option, path); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
	if _, err := protokey.Field("not a message", "name"); !errors.Is(err, keyfunc.ErrUnreadable) {
		t.Errorf("not a message: %v", err)
	}
}

func TestSource(t *testing.T) {
	key, err := keyfunc.Template("{route}|{header.x-tenant}|{field.name}")
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"x-tenant": "acme"}
	src := &protokey.Source{Method: "/a.B/C", Headers: func(n string) string { return headers[n] }, Message: field}
	if name, err := key(src); err != nil || name != "/a.B/C|acme|A%3A1" {
		t.Errorf("name %q, %v", name, err)
	}
	if _, err := key(&protokey.Source{Message: field}); !errors.Is(err, keyfunc.ErrMissing) {
		t.Errorf("no headers: %v, want ErrMissing", err)
	}
	for _, f := range []func(string) (string, error){src.Param, src.Query} {
		if _, err := f("id"); !errors.Is(err, keyfunc.ErrUnsupported) {
			t.Errorf("%v, want ErrUnsupported", err)
		}
	}
	src.PathParam = func(n string) string { return "p-" + n }
	src.QueryParam = func(n string) string { return "q-" + n }
	if p, err := src.Param("id"); err != nil || p != "p-id" {
		t.Errorf("Param: %q, %v", p, err)
	}
	if q, err := src.Query("id"); err != nil || q != "q-id" {
		t.Errorf("Query: %q, %v", q, err)
	}
}

func TestFields(t *testing.T) {
	file := &descriptorpb.FileDescriptorProto{
		Dependency:       []string{"a.proto", "b:c.proto"},
		PublicDependency: []int32{3, -1},
		MessageType:      []*descriptorpb.DescriptorProto{{Name: proto.String("A")}, {}, {Name: proto.String("C")}},
		Options: &descriptorpb.FileOptions{UninterpretedOption: []*descriptorpb.UninterpretedOption{
			{IdentifierValue: proto.String("x")}, {IdentifierValue: proto.String("y")},
		}},
	}
	for _, tc := range []struct {
		msg  proto.Message
		path string
		want []string
	}{
		{file, "dependency[*]", []string{"a.proto", "b:c.proto"}},
		{file, "publicDependency[*]", []string{"3", "-1"}},                                             // by JSON name
		{file, "message_type[*].name", []string{"A", "", "C"}},                                         // an item without the field gives ""
		{file, "options.uninterpreted_option[*].identifier_value", []string{"x", "y"}},                 // through a message, then in each item
		{&descriptorpb.FileDescriptorProto{}, "dependency[*]", []string{}},                             // an empty list
		{&descriptorpb.FileDescriptorProto{}, "options.uninterpreted_option[*].identifier_value", nil}, // a message on the way not set
	} {
		got, err := protokey.Fields(tc.msg, tc.path)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	for path, want := range map[string]string{
		"name[*]":                       "is not a repeated field",
		"options[*]":                    "is not a repeated field",
		"message_type[*]":               "is of kind message",
		"message_type[*].nope":          `has no field "nope"`,
		"message_type[*].options":       "is of kind message",
		"message_type[*].field[*].name": "more than one [*]",
		"message_type.name[*]":          "is not a singular message",
		"message_type[*]x":              "must end a segment",
		"dependency":                    "no [*] segment",
	} {
		_, err := protokey.Fields(file, path)
		if err == nil || !strings.HasPrefix(err.Error(), "protokey: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", path, err, want)
		}
		if errors.Is(err, keyfunc.ErrUnreadable) || errors.Is(err, keyfunc.ErrMissing) {
			t.Errorf("%s: %v is a set-up error, not a bad request", path, err)
		}
	}
	if _, err := protokey.Fields("not a message", "ids[*]"); !errors.Is(err, keyfunc.ErrUnreadable) {
		t.Errorf("not a message: %v", err)
	}
	src := &protokey.Source{Message: file}
	if got, err := src.Fields("dependency[*]"); err != nil || len(got) != 2 {
		t.Errorf("Source.Fields: %q, %v", got, err)
	}

	// Through keyfunc: a name per item, escaped; an item without the field
	// is missing.
	key, err := keyfunc.Template("dep:{field.dependency[*]}")
	if err != nil {
		t.Fatal(err)
	}
	if names, err := key.Names(src, 0); err != nil || !slices.Equal(names, []string{"dep:a.proto", "dep:b%3Ac.proto"}) {
		t.Errorf("Names: %q, %v", names, err)
	}
	if _, err := must(keyfunc.Template("m:{field.message_type[*].name}")).Names(src, 0); !errors.Is(err, keyfunc.ErrMissing) {
		t.Errorf("an item without the field: %v, want ErrMissing", err)
	}
	if _, err := key.Names(src, 1); !errors.Is(err, keyfunc.ErrTooMany) {
		t.Errorf("more items than the bound: %v, want ErrTooMany", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
