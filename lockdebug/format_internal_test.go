package lockdebug

import "testing"

// TestFormatMS: the page's durations (live.js's fmtMS writes the same).
func TestFormatMS(t *testing.T) {
	for ms, want := range map[int64]string{
		0: "0ms", 999: "999ms", 1000: "1.0s", 1549: "1.5s", 59_999: "59.9s", 60_000: "1m00s", 185_000: "3m05s",
		3_599_999: "59m59s", 3_600_000: "1h00m", 7_620_000: "2h07m", -1500: "-1.5s", -20: "-20ms",
	} {
		if got := formatMS(ms); got != want {
			t.Errorf("formatMS(%d) = %q, want %q", ms, got, want)
		}
	}
}
