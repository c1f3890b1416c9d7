module github.com/ratedb/ratedb/ratedbprom

go 1.26.8

replace github.com/ratedb/ratedb => ..
