"""The attention-pattern scrubber's page script and style, as text (:mod:`interp.report.scrubber`
draws with them; :data:`interp.report.display.LIBRARIES` inlines them once per page).

The script defines ``window.ELScrub``: ``ELScrub.mount(id)`` reads the scrubber's JSON (the
payload of :meth:`interp.report.scrubber.ScrubData.payload`: shapes, steps, tokens, and the pattern
bytes deflated and base64-encoded, each step stored as its change from the step before), inflates
the bytes with the browser's ``DecompressionStream`` and draws one canvas per head; the slider,
the arrow keys and the play button step through the checkpoints, a checkbox shows the change since
the previous step, a chooser switches among the prompts, and a line laid over each plotly figure
marks the step shown. Why a hand-written canvas grid instead of plotly frames: the scrubber's
module docstring.
"""

from __future__ import annotations

__all__ = ["SCRUB_STYLE", "scrub_script"]

SCRUB_STYLE = """
.el-scrub{font-family:system-ui,sans-serif;font-size:13px;outline:none}
.el-scrub-controls{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:4px 0 8px 0}
.el-scrub-controls input[type=range]{flex:1 1 260px;min-width:200px}
.el-scrub-step{font-variant-numeric:tabular-nums;min-width:15em;font-weight:600}
.el-scrub-main{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.el-scrub-grid{flex:3 1 600px;min-width:0}
.el-scrub-side{flex:1 1 360px;min-width:300px}
.el-scrub-layer{display:flex;flex-wrap:wrap;gap:6px;margin-bottom:6px}
.el-scrub-head{display:flex;flex-direction:column;align-items:flex-start}
.el-scrub-head span{font-weight:600;font-size:12px}
.el-scrub-head canvas{image-rendering:pixelated}
.el-scrub-tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #888;padding:2px 5px;
  font-size:12px;display:none;z-index:10;white-space:pre}
.el-scrub-scale{display:inline-block;width:120px;height:10px;vertical-align:middle;border:1px solid #aaa}
.el-scrub .el-caption{margin:0 0 8px 0}
.el-scrub .el-scrub-marker{position:absolute;width:2px;pointer-events:none;background:repeating-linear-gradient(#222 0 5px,transparent 5px 8px)}
"""


_SCRIPT = r"""
(function(){
if (window.ELScrub) return;
function lut(stops){const out=[];for(let i=0;i<=255;i++){const t=i/255;let j=0;while(j<stops.length-2&&t>stops[j+1][0])j++;
  const [t0,c0]=stops[j],[t1,c1]=stops[j+1],u=(t-t0)/(t1-t0);out.push(c0.map((c,k)=>Math.round(c+(c1[k]-c)*u)));}return out;}
const SEQ=lut([[0,[255,255,255]],[0.25,[198,219,239]],[0.5,[107,174,214]],[0.75,[33,113,181]],[1,[8,48,107]]]);
const DIV=lut([[0,[178,24,43]],[0.25,[239,138,98]],[0.5,[247,247,247]],[0.75,[103,169,207]],[1,[33,102,172]]]);
async function inflate(b64){const bin=atob(b64),bytes=new Uint8Array(bin.length);for(let i=0;i<bin.length;i++)bytes[i]=bin.charCodeAt(i);
  const stream=new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());}
function el(tag,props,parent){const e=document.createElement(tag);Object.assign(e,props||{});if(parent)parent.appendChild(e);return e;}
const all=[];
async function mount(id){
  const root=document.getElementById(id);
  const spec=JSON.parse(root.querySelector('script.el-scrub-data').textContent);
  const bytes=await inflate(spec.data);
  const n=spec.n, cells=spec.causal?n*(n+1)/2:n*n, H=spec.heads, L=spec.layers, S=spec.steps.length, V=spec.levels;
  const block=L*H*cells;  // one step of one prompt; stored as the change from the step before (mod 256)
  for(let p=0;p<spec.prompts;p++)for(let s=1;s<S;s++){const off=(p*S+s)*block;for(let i=0;i<block;i++)bytes[off+i]=(bytes[off+i]+bytes[off-block+i])&255;}
  const st={prompt:0,index:0,diff:false,timer:null,cell:10,scale:1};
  const at=(q,k)=>spec.causal?(k>q?-1:q*(q+1)/2+k):q*n+k;
  const base=(p,s,l,h)=>(((p*S+s)*L+l)*H+h)*cells;
  const controls=root.querySelector('.el-scrub-controls'), grid=root.querySelector('.el-scrub-grid');
  const play=el('button',{type:'button',textContent:'▶ play',title:'animate through the checkpoints'},controls);
  const slider=el('input',{type:'range',min:0,max:S-1,step:1,value:0},controls);slider.setAttribute('aria-label','checkpoint');
  const label=el('span',{className:'el-scrub-step'},controls);
  const diffBox=el('label',{},controls);const diff=el('input',{type:'checkbox'},diffBox);
  diffBox.appendChild(document.createTextNode(' change since the previous step'));
  const promptBox=el('label',{},controls);promptBox.appendChild(document.createTextNode('prompt '));
  const chooser=el('select',{},promptBox);
  spec.tokens.forEach((t,i)=>{el('option',{value:i,textContent:i+': '+t.join(' ').slice(0,48)},chooser);});
  const scale=el('span',{},controls);const bar=el('span',{className:'el-scrub-scale'},scale);const scaleText=el('span',{},scale);
  const tip=el('div',{className:'el-scrub-tip'},document.body);
  const zoom=new Set(spec.zoom), canvases=[];
  for(let l=0;l<L;l++){const row=el('div',{className:'el-scrub-layer'},grid);
    for(let h=0;h<H;h++){const box=el('div',{className:'el-scrub-head'},row);
      const dp=spec.delta_p&&spec.delta_p[l]&&spec.delta_p[l][h]!=null?'  '+(spec.delta_label||'Δp')+' '+(spec.delta_p[l][h]>=0?'+':'')+spec.delta_p[l][h].toFixed(3):'';
      el('span',{textContent:'L'+l+'H'+h+dp},box);const c=el('canvas',{},box);c.dataset.layer=l;c.dataset.head=h;canvases.push(c);
      c.addEventListener('mousemove',ev=>hover(ev,c,l,h));c.addEventListener('mouseleave',()=>{tip.style.display='none';});}}
  const gap=30;
  function layout(){const width=grid.clientWidth||800;const per=Math.max(120,Math.floor((width-6*(H-1))/Math.min(H,4)));
    st.cell=Math.max(3,Math.min(16,Math.floor((per-gap-2)/n)));
    const px=gap+n*st.cell+2, ratio=window.devicePixelRatio||1;
    for(const c of canvases){c.width=px*ratio;c.height=px*ratio;c.style.width=px+'px';c.style.height=px+'px';}}
  function drawHead(c,l,h){const ctx=c.getContext('2d'),ratio=window.devicePixelRatio||1,cs=st.cell;
    ctx.setTransform(ratio,0,0,ratio,0,0);ctx.fillStyle='#fff';ctx.fillRect(0,0,c.width,c.height);
    const cur=base(st.prompt,st.index,l,h),prev=base(st.prompt,Math.max(0,st.index-1),l,h);
    for(let q=0;q<n;q++)for(let k=0;k<n;k++){const i=at(q,k);let rgb;
      if(i<0)rgb=[232,232,232];else if(st.diff){const d=(bytes[cur+i]-bytes[prev+i])/st.scale;rgb=DIV[Math.max(0,Math.min(255,Math.round((d+1)*127.5)))];}
      else rgb=SEQ[Math.round(bytes[cur+i]*255/V)];
      ctx.fillStyle='rgb('+rgb[0]+','+rgb[1]+','+rgb[2]+')';ctx.fillRect(gap+k*cs,q*cs,cs,cs);}
    if(cs>=7){const tokens=spec.tokens[st.prompt],font=Math.min(11,cs);ctx.fillStyle='#222';ctx.font=font+'px monospace';
      ctx.textAlign='right';ctx.textBaseline='middle';
      for(let q=0;q<n;q++)ctx.fillText(tokens[q].slice(0,5),gap-3,q*cs+cs/2,gap-4);
      ctx.save();ctx.translate(gap,n*cs);ctx.rotate(-Math.PI/2);
      for(let k=0;k<n;k++)ctx.fillText(tokens[k].slice(0,5),-3,k*cs+cs/2,gap-4);ctx.restore();}}
  function hover(ev,c,l,h){const r=c.getBoundingClientRect(),cs=st.cell,k=Math.floor((ev.clientX-r.left-gap)/cs),q=Math.floor((ev.clientY-r.top)/cs);
    if(k<0||q<0||k>=n||q>=n||at(q,k)<0){tip.style.display='none';return;}
    const t=spec.tokens[st.prompt],cur=bytes[base(st.prompt,st.index,l,h)+at(q,k)],prev=bytes[base(st.prompt,Math.max(0,st.index-1),l,h)+at(q,k)];
    const digits=V>100?3:2,chg=(cur-prev)/V;
    tip.textContent='L'+l+'H'+h+'  query '+q+' "'+t[q]+'" → key '+k+' "'+t[k]+'"\nattention '+(cur/V).toFixed(digits)+'   change since the previous step '+(chg>=0?'+':'')+chg.toFixed(digits);
    tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';tip.style.display='block';}
  function changeScale(){let m=1;const a=base(st.prompt,st.index,0,0),b=base(st.prompt,Math.max(0,st.index-1),0,0);
    for(let i=0;i<block;i++){const d=Math.abs(bytes[a+i]-bytes[b+i]);if(d>m)m=d;}return m;}
  function drawGrid(){if(st.diff)st.scale=changeScale();for(const c of canvases)drawHead(c,+c.dataset.layer,+c.dataset.head);
    const s=spec.steps[st.index],prev=st.index>0?spec.steps[st.index-1]:null;
    label.textContent='step '+s+(zoom.has(s)?' (zoomed)':'')+' · checkpoint '+(st.index+1)+' of '+S+(st.diff?(prev===null?' · first step: no change':' · minus step '+prev):'')
      +(s===spec.pre?' · pre step':'')+(s===spec.post?' · post step':'');
    bar.style.background=st.diff?'linear-gradient(to right,rgb(178,24,43),rgb(247,247,247),rgb(33,102,172))':'linear-gradient(to right,#fff,rgb(8,48,107))';
    const top=(st.scale/V).toFixed(V>100?3:2);scaleText.textContent=st.diff?' −'+top+' … +'+top+' (change in attention; the largest at this step)':' 0 … 1 (attention)';}
  function markers(){const x=Math.max(spec.steps[st.index],0.5);
    for(const f of spec.figs){const gd=document.getElementById(f.id),fl=gd&&gd._fullLayout;if(!f.marker||!fl||!fl.xaxis||!fl._size)continue;
      let m=gd.querySelector('.el-scrub-marker');const host=gd.querySelector('.svg-container');if(!host)continue;
      if(!m){m=el('div',{className:'el-scrub-marker'},host);m.title='the step the grid shows';}
      const ax=fl.xaxis,size=fl._size,px=ax.l2p(ax.d2l(x));
      m.style.left=(size.l+px-1)+'px';m.style.top=size.t+'px';m.style.height=size.h+'px';m.style.display=(px>=-1&&px<=size.w+1)?'block':'none';}}
  for(const f of spec.figs){const gd=document.getElementById(f.id);if(gd&&gd.on)gd.on('plotly_afterplot',markers);}
  async function go(index){const t0=performance.now();st.index=Math.max(0,Math.min(S-1,index));slider.value=st.index;drawGrid();
    markers();await new Promise(r=>requestAnimationFrame(()=>r()));
    const ms=performance.now()-t0;root.dataset.frameMs=ms.toFixed(2);(window.ELScrubFrames=window.ELScrubFrames||[]).push(ms);}
  function stop(){if(st.timer){clearInterval(st.timer);st.timer=null;play.textContent='▶ play';}}
  slider.addEventListener('input',()=>{stop();go(+slider.value);});
  diff.addEventListener('change',()=>{st.diff=diff.checked;drawGrid();});
  chooser.addEventListener('change',()=>{st.prompt=+chooser.value;drawGrid();});
  play.addEventListener('click',()=>{if(st.timer){stop();return;}if(st.index>=S-1)go(0);play.textContent='❚❚ pause';
    st.timer=setInterval(()=>{if(st.index>=S-1){stop();return;}go(st.index+1);},600);});
  function key(ev){if(ev.key!=='ArrowRight'&&ev.key!=='ArrowLeft')return false;if(ev.target===slider)return false;
    if(ev.target.tagName==='SELECT'||ev.target.tagName==='INPUT')return false;ev.preventDefault();stop();go(st.index+(ev.key==='ArrowRight'?1:-1));return true;}
  root.addEventListener('keydown',ev=>{if(key(ev))ev.stopPropagation();});
  root.addEventListener('mousedown',()=>{window.ELScrubActive=api;});
  const api={go,key,root,draw:drawGrid,markers,get index(){return st.index;},get steps(){return spec.steps;},setPrompt(p){st.prompt=p;chooser.value=p;drawGrid();},
    setDiff(d){st.diff=d;diff.checked=d;drawGrid();}};
  all.push(api);
  let width=grid.clientWidth;layout();drawGrid();markers();
  window.addEventListener('resize',()=>{if(grid.clientWidth!==width){width=grid.clientWidth;layout();drawGrid();}});
  root.dataset.ready='1';
  return api;}
document.addEventListener('keydown',ev=>{if(ev.target!==document.body)return;const api=window.ELScrubActive||(all.length===1?all[0]:null);if(api)api.key(ev);});
window.ELScrub={mount:(id)=>{const p=mount(id);p.catch(e=>{console.error('scrubber '+id+': '+e);});return p;},all};
})();
"""


def scrub_script() -> str:
    """The scrubber's page script (defines ``window.ELScrub``; inlined once per page)."""
    return f"<style>{SCRUB_STYLE}</style><script type='text/javascript'>{_SCRIPT}</script>"
