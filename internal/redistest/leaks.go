package redistest

import (
	"time"

	"go.uber.org/goleak"
)

// LeakPatience is how long FindLeaks waits for goroutines to end. Those a
// test's clean-ups stop (a server's, a client's, a Locker's background
// clean-ups) end soon, but "soon" on a loaded machine under the race
// detector can be well over goleak's own patience of about half a second;
// a goroutine really leaked stays for good and is reported all the same.
const LeakPatience = 10 * time.Second

// FindLeaks is goleak.Find with LeakPatience: it reports the goroutines
// (other than those opts ignore) still running after that long.
func FindLeaks(opts ...goleak.Option) error {
	deadline := time.Now().Add(LeakPatience)
	for {
		err := goleak.Find(opts...) // retries for about half a second itself
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
