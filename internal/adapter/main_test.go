package adapter

import (
	"testing"

	"github.com/reqlock/reqlock/internal/adaptertest"
)

func TestMain(m *testing.M) { adaptertest.Main(m) }
