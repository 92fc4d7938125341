package redisstore

import (
	"errors"

	"github.com/redis/rueidis"
)

func isNil(err error) bool {
	var re *rueidis.RedisError
	return rueidis.IsRedisNil(err) || (errors.As(err, &re) && re.IsNil())
}
