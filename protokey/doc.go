// Package protokey reads lock name parts from protobuf messages: the field
// paths of keyfunc's {field.PATH} parts, resolved with protoreflect, and
// Source, the keyfunc.Source of an RPC call whose request is a protobuf
// message. reqlock's RPC adapters (grpclock, connectlock, kratoslock) share
// it; adapters of other RPC frameworks can use it too.
//
//	src := &protokey.Source{Method: "/orders.v1.Orders/Pay", Headers: header.Get, Message: req}
//	name, err := key(src) // key, _ := keyfunc.Template("order:{field.order.id}")
//
// # Field paths
//
// A path goes through nested messages by field name (or JSON name), as in
// "order.id"; it is resolved once per message type. Supported leaf kinds:
// string; bool ("true"); the integer kinds (decimal); enums, by value name,
// or by number for a number without a name. Lists, maps, bytes, floating
// point and message leaves are set-up errors. A field that is not set reads
// as "", which keyfunc takes as missing: for a proto3 field without explicit
// presence, that is one holding its zero value ("", 0, false, the first enum
// value).
//
// # Repeated fields
//
// A segment that ends in "[*]" names every item of a repeated field, as in
// keyfunc's paths for JSON arrays: "sku[*]" reads each value of a repeated
// scalar field sku, "items[*].sku" the sku of each message of a repeated
// message field items (Fields, and Source.Fields, which makes Source a
// keyfunc.ArraySource). A key with such a path yields one name per item,
// which the RPC adapters take all at once with core.Locker.AcquireAll:
//
//	key, _ := keyfunc.Template("item:{field.items[*].sku}")
//	names, err := key.Names(src, 0) // "item:A", "item:B" for items A and B
//
// A path has one "[*]"; the segments before it are singular messages, and
// what follows leads to a supported scalar in each item. An empty list, or
// an item whose field is not set, is a missing part for keyfunc (an error
// wrapping keyfunc.ErrMissing: the call fails with InvalidArgument).
//
// The module depends on the root reqlock module (for keyfunc) and on
// google.golang.org/protobuf only.
package protokey
