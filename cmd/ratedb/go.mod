module github.com/ratedb/ratedb/cmd/ratedb

go 1.26.8

replace github.com/ratedb/ratedb => ../..
