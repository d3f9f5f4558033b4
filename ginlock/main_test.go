package ginlock_test

import (
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/reqlock/reqlock/internal/adaptertest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	adaptertest.Main(m)
}
