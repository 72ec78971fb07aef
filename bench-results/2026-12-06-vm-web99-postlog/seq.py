import http.client, sys, time
port=int(sys.argv[1]); n=int(sys.argv[2])
c=http.client.HTTPConnection('127.0.0.1',port)
body="class=1&client=2&dir=00004&num=3&urlroot=/file_set/"
t=time.time()
for i in range(n):
    c.request("POST","/web99",body,{"Content-Type":"application/x-www-form-urlencoded","Cookie":"my_cookie=user_id=10002&last_ad=0"})
    r=c.getresponse(); r.read()
    assert r.status==200, r.status
print(f"{n/(time.time()-t):.0f} sequential POSTs/s")
