from conftest import new_id


def test_full_cycle_in_process_and_subprocess(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    rid = new_id()
    r = relay.send(alice, "bob", "please review", request_id=rid)
    assert r.code == 0, r.err
    assert r.json["state"] == "queued" and r.json["duplicate"] is False
    c = relay.proc("claim", "--json", env=bob)
    assert c.code == 0, c.err
    assert c.json["text"] == "please review"
    assert relay("ack", rid, "--json", env=bob).json["state"] == "acknowledged"
    assert relay("reply", rid, "LGTM", "--json", env=bob).json["state"] == "completed"
    w = relay("wait", rid, "--json", env=alice)
    assert w.code == 0 and w.json["reply"] == "LGTM"
