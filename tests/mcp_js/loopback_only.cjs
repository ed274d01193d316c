// Preloaded (node --require) into MCP servers the tests start over HTTP: every server the process
// starts on a bare port listens on 127.0.0.1 only (server-everything's own transport would listen on
// every interface, and the tests reach nothing beyond loopback).
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const done = args.find((a) => typeof a === "function");
    return listen.call(this, { port: Number(args[0]), host: "127.0.0.1" }, done);
  }
  return listen.apply(this, args);
};
